"""What a report section declares: one optional part of summary.json, computed once and
shown by every output that shows it (zqbench.metrics.sections lists them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from zqbench.metrics.frame import MetricFrame
    from zqbench.metrics.sections.text import Figure
    from zqbench.metrics.summarize import RunInfo
    from zqbench.summary import Summary

# Where report.html and summary.md show a section: in the verdict banner (what ended or
# bent the run, read before any number), after the key metrics (what the server and the
# network did), or after head-of-line blocking (how the requests fared, by stage or turn).
Place = Literal["banner", "body", "late"]


@dataclass(frozen=True)
class Section:
    """One report section. Its model is a part of summary.json (`Summary.<name>`, in
    zqbench/summary.py with the format it versions); its partials are
    outputs/templates/sections/<name>.html.j2 and <name>.md.j2, each a macro `show(data)`
    given what `view` returns."""

    name: str  # Summary's field, and the partials' name
    place: Place
    # What the partials are given, from the redacted summary and the section's own figure
    # (None without one); None: the run has no such section and the pages leave it out.
    # Left out: the model itself, `Summary.<name>`.
    view: Callable[[Summary, Figure | None], Any] | None = None
    # The terminal's lines after the verdict (cli/live_view.py); [] for none.
    lines: Callable[[Summary], list[str]] = lambda summary: []
    # Its part of the summary from the run's frame (metrics/summarize.py); None: a later
    # stage measures it and sets it on the summary (the pipeline, `zqbench profile`).
    compute: Callable[[MetricFrame, RunInfo], Any] | None = None
    figure: str | None = None  # the plot it holds (outputs/plots.py's name), not in Figures
    # Jinja filters its partials format the model's values with (both environments have
    # every section's, and text.FILTERS): the partials lay out the model itself, so no
    # dataclass of strings repeats it field by field.
    filters: Mapping[str, Callable[..., object]] = field(default_factory=dict)

    def data(self, summary: Summary, plot: Figure | None) -> Any:
        """What the partials are given; None when the run has no such section."""
        if self.view is None:
            return getattr(summary, self.name)
        return self.view(summary, plot)


def sentence(
    name: str, text: Callable[[Any], str], compute: Callable[[MetricFrame, RunInfo], Any]
) -> Section:
    """A banner section that is one sentence, `text` of its model: the pages and the
    terminal show the same words, and nothing when the run has no such part."""

    def said(summary: Summary) -> str | None:
        part = getattr(summary, name)
        return None if part is None else text(part)

    return Section(
        name,
        "banner",
        view=lambda s, _: said(s),
        lines=lambda s: [line] if (line := said(s)) else [],
        compute=compute,
    )
