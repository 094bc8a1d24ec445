"""summary.md: a short Markdown page for a CI job summary ($GITHUB_STEP_SUMMARY).

Rendered from templates/summary.md.j2 over the view model it shares with report.html
(outputs/view.py): verdict line, SLO table, key metrics per stage and class (ms),
unavailable metrics, status mix (overall and per stage), error migration (baseline vs
overload stage), head-of-line blocking, refusals, and the optional sections the run has.
"""

from __future__ import annotations

from zqbench.outputs.templating import markdown_environment
from zqbench.outputs.view import build_view
from zqbench.summary import Summary


def render_summary_md(summary: Summary) -> str:
    """The summary.md text of a summary (redacted on the way)."""
    template = markdown_environment().get_template("summary.md.j2")
    return template.render(view=build_view(summary))
