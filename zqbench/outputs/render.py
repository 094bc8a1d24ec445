"""summary.md and report.html from templates/summary.md.j2 and report.html.j2 over the one
view model (outputs/view.py), and the page's figures (plots/*.png).

    render_summary_md(summary)              -> summary.md's text, for a CI job summary
    render_html(out_dir, summary, samples)  -> [plots/<name>.png ..., report.html]

report.html is one self-contained page (inline CSS, images as base64 PNG, no script), with
HTML autoescape on: every string from the run is redacted by the view and escaped by jinja2.
summary.json and samples.parquet are inputs, never rewritten here; zqbench.outputs.registry
says when the files are written (`zqbench run`, `report`, `gate --write`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import zqbench
from zqbench.metrics.frame import MetricFrame, Samples, build_frame
from zqbench.outputs.json_out import write_atomic
from zqbench.outputs.paths import PLOTS_DIR, REPORT_HTML
from zqbench.outputs.templating import html_environment, markdown_environment
from zqbench.outputs.view import FigureData, build_view
from zqbench.summary import Summary
from zqbench.telemetry.table import GPU_TABLE


def render_summary_md(summary: Summary) -> str:
    """The summary.md text of a summary (redacted on the way)."""
    template = markdown_environment().get_template("summary.md.j2")
    return template.render(view=build_view(summary))


def render_report_html(summary: Summary, figures: Sequence[FigureData]) -> str:
    """The page; figures are (name, title, caption, png bytes)."""
    template = html_environment().get_template("report.html.j2")
    return template.render(view=build_view(summary, figures), version=zqbench.__version__)


def frame_of(summary: Summary, samples: Samples) -> MetricFrame:
    """The per-request metric frame, on the run's own clock anchor and server offset."""
    return build_frame(
        samples,
        start_epoch_ns=summary.clock.start_epoch_ns,
        clock_offset_ns=summary.clock.server_offset_ns,
    )


def load_gpu(out_dir: Path, start_epoch_ns: int) -> dict[str, np.ndarray] | None:
    """GPU readings as seconds since the run's start, or None when none were collected.

    The table is the telemetry collector's (zqbench.telemetry.table): one row per reading,
    t_epoch_ns (int64, epoch ns), gpu (device index), util (busy 0..1)."""
    path = out_dir / GPU_TABLE
    if not path.is_file():
        return None
    table = pq.read_table(path, columns=["t_epoch_ns", "gpu", "util"]).to_pandas()
    return {
        "t_s": (table["t_epoch_ns"].to_numpy(np.int64) - start_epoch_ns) / 1e9,
        "gpu": table["gpu"].to_numpy(),
        "util": table["util"].to_numpy(np.float64),
    }


def render_html(
    out_dir: Path, summary: Summary, samples: Samples, frame: MetricFrame | None = None
) -> list[Path]:
    """plots/*.png and report.html (the PNGs are embedded in the page, and kept beside it);
    `frame`: the run's metric frame when the caller has it (else built from the samples)."""
    from zqbench.outputs.plots import render_plots

    frame = frame_of(summary, samples) if frame is None else frame
    gpu = load_gpu(out_dir, summary.clock.start_epoch_ns)
    plots = render_plots(summary, frame, out_dir / PLOTS_DIR, gpu_samples=gpu)
    figures = [(p.name, p.title, p.caption, p.path.read_bytes()) for p in plots]
    html = render_report_html(summary, figures)
    page = write_atomic(out_dir / REPORT_HTML, html)
    return [*(p.path for p in plots), page]
