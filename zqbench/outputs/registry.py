"""Every file zqbench writes, in one table: the registry of writers.

    document        writers (file names from paths.py)                 written by
    RunOutput       summary.json  summary.md  junit.xml  report.html*   zqbench run, report, gate
                                                                        (report: a killed run
                                                                        recovered, all four)
    SweepReport     sweep.json  sweep.md                                zqbench sweep
    AdviceReport    advice.json  advice.md  plots/advice.png            zqbench sweep --server-cmd
    ConformReport   conform.json  junit.xml                             zqbench conform
    Comparison      compare.json  compare.md  compare.html*             zqbench compare

    * with its figures, plots/<name>.png, embedded in the page and kept beside it

A writer renders one document into one file (and its figures); `write_all` writes a group of
them into a folder. The renderers live in the modules named after their format (json_out,
markdown, junit, html/render, sweep, conform, compare_render); this module only says which
file each document becomes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar, Union

from zqbench.outputs import advice, compare_render, conform, paths, plots, sweep
from zqbench.outputs.advice_model import AdviceReport
from zqbench.outputs.json_out import dumps_summary, write_atomic
from zqbench.outputs.junit import render_junit
from zqbench.outputs.render import render_html, render_summary_md
from zqbench.safe_files import make_dir
from zqbench.summary import Summary, SweepReport

if TYPE_CHECKING:
    from zqbench.conform.model import ConformReport
    from zqbench.metrics.frame import MetricFrame, Samples
    from zqbench.saved.compare import Comparison

D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class TextWriter(Generic[D]):
    """One text file: its name, and the document's text in it."""

    file: str
    render: Callable[[D], str]

    def write(self, doc: D, folder: Path) -> list[Path]:
        # Atomic: a reader (a CI step, a browser) never sees half a file.
        return [write_atomic(folder / self.file, self.render(doc))]


@dataclass(frozen=True, slots=True)
class PageWriter(Generic[D]):
    """A page with figures: `draw` writes the figures into plots/ and the page beside them,
    and returns every file it wrote."""

    file: str
    draw: Callable[[D, Path], list[Path]]

    def write(self, doc: D, folder: Path) -> list[Path]:
        return self.draw(doc, folder)


Writer = Union[TextWriter[D], PageWriter[D]]  # noqa: UP007 (a generic alias needs Union on 3.10)


def write_all(writers: Sequence[Writer[D]], doc: D, folder: Path) -> list[Path]:
    make_dir(folder)
    return [path for writer in writers for path in writer.write(doc, folder)]


@dataclass(frozen=True)
class RunOutput:
    """What a run's files are rendered from: its summary and, for the report's figures, its
    samples (read only when a figure needs them)."""

    summary: Summary
    samples: Callable[[], Samples]  # a DataFrame, or samples.parquet a column at a time
    inconclusive_fails: bool = True
    # The per-request metrics the figures read; None: built from the samples when needed.
    frame: Callable[[], MetricFrame] | None = None


def _junit(run: RunOutput) -> str:
    return render_junit(
        run.summary, inconclusive_as="failure" if run.inconclusive_fails else "skipped"
    )


def _report_html(run: RunOutput, folder: Path) -> list[Path]:
    frame = None if run.frame is None else run.frame()
    return render_html(folder, run.summary, run.samples(), frame)


SUMMARY_JSON_WRITER: TextWriter[RunOutput] = TextWriter(
    paths.SUMMARY_JSON, lambda run: dumps_summary(run.summary)
)
RUN_WRITERS: tuple[Writer[RunOutput], ...] = (
    SUMMARY_JSON_WRITER,
    TextWriter(paths.SUMMARY_MD, lambda run: render_summary_md(run.summary)),
    TextWriter(paths.JUNIT_XML, _junit),
    PageWriter(paths.REPORT_HTML, _report_html),
)


SWEEP_WRITERS: tuple[Writer[SweepReport], ...] = (
    TextWriter(paths.SWEEP_JSON, SweepReport.to_json),
    TextWriter(paths.SWEEP_MD, sweep.render_sweep_md),
)


def _advice_plot(report: AdviceReport, folder: Path) -> list[Path]:
    make_dir(folder / paths.PLOTS_DIR)
    return [plots.advice(report, folder / paths.PLOTS_DIR).path]


ADVICE_WRITERS: tuple[Writer[AdviceReport], ...] = (
    TextWriter(paths.ADVICE_JSON, AdviceReport.to_json),
    TextWriter(paths.ADVICE_MD, advice.render_advice_md),
    PageWriter(f"{paths.PLOTS_DIR}/advice.png", _advice_plot),
)

CONFORM_JSON_WRITER: TextWriter[ConformReport] = TextWriter(paths.CONFORM_JSON, conform.dumps)
CONFORM_JUNIT_WRITER: TextWriter[ConformReport] = TextWriter(paths.JUNIT_XML, conform.render_junit)
CONFORM_WRITERS = (CONFORM_JSON_WRITER, CONFORM_JUNIT_WRITER)


def _compare_html(comparison: Comparison, folder: Path) -> list[Path]:
    page, figures = compare_render.render_compare_page(comparison, folder)
    return [write_atomic(folder / paths.COMPARE_HTML, page), *figures]


COMPARE_WRITERS: tuple[Writer[Comparison], ...] = (
    TextWriter(paths.COMPARE_JSON, compare_render.dumps),
    TextWriter(paths.COMPARE_MD, compare_render.render_compare_md),
    PageWriter(paths.COMPARE_HTML, _compare_html),
)


# ------------------------------------------------------------------ what the commands write
def write_run(folder: Path, run: RunOutput, *, html: bool = True) -> list[Path]:
    """Every file of a run (`zqbench run`); report.html and its figures unless `html` is off."""
    writers = [w for w in RUN_WRITERS if html or w.file != paths.REPORT_HTML]
    return write_all(writers, run, folder)


def write_sweep(folder: Path, report: SweepReport) -> list[Path]:
    return write_all(SWEEP_WRITERS, report, folder)


def write_advice(folder: Path, report: AdviceReport) -> list[Path]:
    return write_all(ADVICE_WRITERS, report, folder)


def write_conform(
    report: ConformReport,
    *,
    out: Path | None = None,
    json_path: Path | None = None,
    junit: Path | None = None,
) -> list[Path]:
    """conform.json and junit.xml in the folder `out`, and each file asked for by path."""
    written = write_all(CONFORM_WRITERS, report, out) if out is not None else []
    for path, writer in ((json_path, CONFORM_JSON_WRITER), (junit, CONFORM_JUNIT_WRITER)):
        if path is not None:
            written.append(write_atomic(Path(path), writer.render(report)))
    return written


def write_comparison(comparison: Comparison, folder: Path) -> list[Path]:
    return write_all(COMPARE_WRITERS, comparison, folder)
