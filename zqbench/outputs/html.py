"""report.html: one self-contained page (inline CSS, images as base64 PNG, no script).

Rendered from templates/report.html.j2 over the view model it shares with summary.md
(outputs/view.py), with HTML autoescape on: every string from the run is redacted by the
view and escaped by jinja2. Verdict banner (each SLO's value, threshold, CI, verdict), run
facts, key metrics, status mix, error migration, head-of-line blocking, refusals, figures,
and each optional section the run has (zqbench.metrics.sections) where SECTIONS places it.
"""

from __future__ import annotations

from collections.abc import Sequence

import zqbench
from zqbench.outputs import view
from zqbench.outputs.templating import html_environment
from zqbench.summary import Summary


def render_report_html(summary: Summary, figures: Sequence[view.FigureData]) -> str:
    """The page; figures are (name, title, caption, png bytes)."""
    template = html_environment().get_template("report.html.j2")
    return template.render(view=view.build_view(summary, figures), version=zqbench.__version__)
