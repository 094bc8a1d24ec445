"""Render every output of a saved run: summary.md, junit.xml, plots/*.png, report.html.

    render_all(out_dir)  -> [paths written]

`zqbench run` calls it after writing summary.json; `zqbench report RUN_DIR` calls it on a
saved run (no traffic). summary.json and samples.parquet are inputs, never rewritten here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zqbench.metrics.frame import MetricFrame, build_frame
from zqbench.outputs.json_out import write_atomic
from zqbench.outputs.junit import write_junit
from zqbench.outputs.markdown import write_summary_md
from zqbench.outputs.paths import JUNIT_XML, SUMMARY_MD
from zqbench.reporting.saved import load_run

REPORT_HTML = "report.html"
PLOTS_DIR = "plots"
# GPU telemetry table (written by the telemetry collector, when one ran): one row per
# reading, columns t_epoch_ns (int64, epoch ns), gpu (int, device index), util (busy 0..1).
GPU_TABLE = "telemetry.gpu.parquet"


def frame_of(summary: Mapping[str, Any], samples: pd.DataFrame) -> MetricFrame:
    """The per-request metric frame, on the run's own clock anchor and server offset."""
    clock = summary["clock"]
    return build_frame(
        samples,
        start_epoch_ns=int(clock["start_epoch_ns"]),
        clock_offset_ns=int(clock.get("server_offset_ns", 0)),
    )


def load_gpu(out_dir: Path, start_epoch_ns: int) -> dict[str, np.ndarray] | None:
    """GPU readings as seconds since the run's start, or None when none were collected."""
    path = out_dir / GPU_TABLE
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["t_epoch_ns", "gpu", "util"]).to_pandas()
    return {
        "t_s": (table["t_epoch_ns"].to_numpy(np.int64) - start_epoch_ns) / 1e9,
        "gpu": table["gpu"].to_numpy(),
        "util": table["util"].to_numpy(np.float64),
    }


def render_html(out_dir: Path, summary: Mapping[str, Any], samples: pd.DataFrame) -> list[Path]:
    """plots/*.png and report.html (the PNGs are embedded in the page, and kept beside it)."""
    from zqbench.outputs.html import render_report_html
    from zqbench.reporting.plots import render_plots

    frame = frame_of(summary, samples)
    gpu = load_gpu(out_dir, int(summary["clock"]["start_epoch_ns"]))
    plots = render_plots(summary, frame, out_dir / PLOTS_DIR, gpu_samples=gpu)
    figures = [(p.name, p.title, p.caption, p.path.read_bytes()) for p in plots]
    page = write_atomic(out_dir / REPORT_HTML, render_report_html(summary, figures))
    return [*(p.path for p in plots), page]


def render_all(out_dir: Path, *, inconclusive_fails: bool = True) -> list[Path]:
    """Re-render summary.md, junit.xml, plots and report.html from a saved run folder.

    Raises UsageError (exit 2) when the folder is not a run."""
    run = load_run(Path(out_dir))
    summary = run.summary
    written = [
        write_summary_md(summary, run.path / SUMMARY_MD),
        write_junit(
            summary,
            run.path / JUNIT_XML,
            inconclusive_as="failure" if inconclusive_fails else "skipped",
        ),
    ]
    return written + render_html(run.path, summary, run.samples())
