"""A saved run folder, read back: summary.json, the samples, and the RunInfo they came from.

    run = load_run(Path("reports/20261129T104501Z-burst"))
    run.summary            # the Summary of summary.json, validated
    run.samples()          # pandas DataFrame of samples.parquet (or the raw worker streams)
    run_info(run.summary)  # the RunInfo that `summarize` needs, rebuilt from summary.json

Every report, gate and comparison starts here, so a folder that is not a run fails in one
place with one message (UsageError, exit 2) naming the folder and what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from zqbench.errors import UsageError
from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import RunInfo, ValidityThresholds
from zqbench.outputs.json_out import load_summary
from zqbench.outputs.paths import SUMMARY_JSON
from zqbench.samples import writer
from zqbench.samples.columns import SampleColumns
from zqbench.summary import Summary

if TYPE_CHECKING:
    import pandas as pd

    from zqbench.metrics.frame import Samples


@dataclass
class SavedRun:
    path: Path
    summary: Summary
    _samples: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    def samples(self) -> pd.DataFrame:
        """The samples, read once (Parquet, or the worker streams of an unfinished run)."""
        if self._samples is None:
            samples = writer.load_samples(self.path).to_pandas()
            _check_ids(self.path, samples["request_id"])
            self._samples = samples
        return self._samples

    def columns(self) -> Samples:
        """The samples as the metric frame reads them, checked as `samples()` checks them:
        samples.parquet a column at a time (SampleColumns), never the whole table at once;
        the worker streams of an unfinished run as a DataFrame."""
        if self._samples is not None:
            return self._samples
        parquet = writer.checked_file(self.path)
        if parquet is None:
            return self.samples()
        columns = SampleColumns(parquet)
        _check_ids(self.path, columns["request_id"])
        return columns


def _check_ids(path: Path, ids: pd.Series) -> None:
    repeated = ids[ids.duplicated()]
    if len(repeated):
        # One run sends each request id once: repeats are rows of another run.
        raise UsageError(
            f"{path}: request id {int(repeated.iloc[0])} is in the samples more "
            f"than once ({len(repeated)} repeated rows): not one run's samples"
        )


def load_run(path: Path) -> SavedRun:
    """Open a run folder; raises UsageError when it is not a readable zqbench run."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: not a run folder (no such directory)")
    summary_path = path / SUMMARY_JSON
    if not summary_path.is_file():
        raise UsageError(f"{path}: not a run folder (no {SUMMARY_JSON})")
    summary = load_summary(summary_path)
    if not (path / writer.PARQUET_NAME).is_file() and not any(path.glob(writer.STREAM_GLOB)):
        raise UsageError(f"{path}: not a run folder (no {writer.PARQUET_NAME})")
    return SavedRun(path, summary)


def run_info(summary: Summary) -> RunInfo:
    """The RunInfo a run was summarised with, rebuilt from its summary.json.

    Everything `summarize` reads besides the samples is saved in summary.json: the clock,
    the stages, the offered load, the validity thresholds, the telemetry scalars, the
    server's queue, how the target was resolved, what packet loss did and what the outcomes
    were judged by."""
    clock, load = summary.clock, summary.load
    return RunInfo(
        scenario=summary.scenario.name,
        target=summary.target,
        api=summary.api,
        started_at=summary.started_at,
        start_monotonic_ns=clock.start_monotonic_ns,
        start_epoch_ns=clock.start_epoch_ns,
        duration_s=summary.duration,
        loop=load.loop,
        scenario_config=summary.scenario.config,
        offered_requests=load.offered_requests,
        offered_rate=load.offered_rate,
        environment=summary.environment,
        stages=[
            StageInfo(
                s.name,
                s.start,
                s.end,
                s.target_rate,
                None if s.classes is None else tuple(s.classes),
            )
            for s in summary.stages
        ],
        # Every field, a None among them: a run judged before a limit existed stays so
        validity=ValidityThresholds(**dict(summary.validity.thresholds)),
        clock_offset_ns=clock.server_offset_ns,
        clock_offset_source=clock.server_offset_source,
        telemetry=summary.telemetry,
        server_queue=summary.server_queue,
        target_resolution=(
            None
            if summary.target_resolution is None
            else summary.target_resolution.model_dump(mode="json")
        ),
        packet_loss=summary.packet_loss,
        outcome_basis=None if summary.outcomes is None else summary.outcomes.basis,
        stop=summary.stop,  # what the rules saw while the load ran: judged again as it was
        client_lag_p99_s=load.client_lag_p99_s,
        client_lag_max_s=load.client_lag_max_s,
    )
