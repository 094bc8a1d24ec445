"""Stage 5, write: the summary -> every output beside samples.parquet.

summary.json   summary.md   junit.xml   report.html (+ plots/), unless html is off;
which file is rendered how is zqbench.outputs.registry's table. run-start.json, which the
summary supersedes, is removed once every output is written.
"""

from __future__ import annotations

from pathlib import Path

from zqbench.metrics.frame import MetricFrame
from zqbench.outputs.paths import RUN_START_JSON
from zqbench.outputs.registry import RunOutput, write_run
from zqbench.samples.columns import SampleColumns
from zqbench.samples.writer import PARQUET_NAME
from zqbench.summary import Summary


def write_outputs(
    out_dir: Path,
    summary: Summary,
    frame: MetricFrame,
    *,
    inconclusive_fails: bool,
    html: bool,
) -> list[Path]:
    """Every output of a run; an inconclusive SLO is a JUnit failure or a skip. The figures
    read the frame the summary was computed from."""
    run = RunOutput(
        summary,
        lambda: SampleColumns(out_dir / PARQUET_NAME),
        inconclusive_fails=inconclusive_fails,
        frame=lambda: frame,
    )
    written = write_run(out_dir, run, html=html)
    (out_dir / RUN_START_JSON).unlink(missing_ok=True)
    return written
