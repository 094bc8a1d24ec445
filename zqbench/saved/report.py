"""`zqbench report DIR`: a saved run's files rendered again from its summary.json and
samples, or a run killed before its summary.json recovered (`recover.py`) and written whole.
The renderers and the file names are zqbench.outputs.registry's."""

from __future__ import annotations

from pathlib import Path

from zqbench.outputs.paths import RUN_START_JSON, SUMMARY_JSON
from zqbench.outputs.registry import RUN_WRITERS, RunOutput, write_all
from zqbench.samples import writer
from zqbench.samples.columns import SampleColumns
from zqbench.saved.recover import recover_run, unfinished
from zqbench.saved.run import load_run


def rerender_run(folder: Path, *, inconclusive_fails: bool = True) -> list[Path]:
    """Every file of a saved run but its summary.json, from its summary.json and samples
    (`zqbench report`; `gate --write` after replacing summary.json). UsageError when the
    folder is not a run."""
    saved = load_run(Path(folder))
    run = RunOutput(saved.summary, saved.columns, inconclusive_fails)
    return write_all([w for w in RUN_WRITERS if w.file != SUMMARY_JSON], run, saved.path)


def report_run(folder: Path, *, inconclusive_fails: bool = True) -> list[Path]:
    """`zqbench report`: a saved run's files rendered again, or, for a run killed before its
    summary.json, the run recovered from its samples (zqbench.saved.recover) and every
    file written, summary.json and samples.parquet included."""
    folder = Path(folder)
    if not unfinished(folder):
        return rerender_run(folder, inconclusive_fails=inconclusive_fails)
    summary, frame = recover_run(folder)
    parquet = folder / writer.PARQUET_NAME  # recover_run merged the streams into it
    run = RunOutput(summary, lambda: SampleColumns(parquet), inconclusive_fails, lambda: frame)
    written = write_all(RUN_WRITERS, run, folder)
    (folder / RUN_START_JSON).unlink(missing_ok=True)  # superseded by summary.json
    return [folder / writer.PARQUET_NAME, *written]
