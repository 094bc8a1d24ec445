"""A saved run folder, read back: summary.json, the samples, and the RunInfo they came from.

    run = load_run(Path("reports/20261129T104501Z-burst"))
    run.summary            # the summary.json dict, as written
    run.samples()          # pandas DataFrame of samples.parquet (or the raw worker streams)
    run_info(run.summary)  # the RunInfo that `summarize` needs, rebuilt from summary.json

Every report, gate and comparison starts here, so a folder that is not a run fails in one
place with one message (UsageError, exit 2) naming the folder and what is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zqbench import recorder
from zqbench.errors import UsageError
from zqbench.metrics.summary import SCHEMA, RunInfo, ValidityThresholds
from zqbench.outputs.paths import SUMMARY_JSON
from zqbench.stages import StageInfo

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class SavedRun:
    path: Path
    summary: dict[str, Any]
    _samples: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    def samples(self) -> pd.DataFrame:
        """The samples, read once (Parquet, or the worker streams of an unfinished run)."""
        if self._samples is None:
            self._samples = recorder.load_samples(self.path).to_pandas()
        return self._samples


def load_run(path: Path, *, need_samples: bool = True) -> SavedRun:
    """Open a run folder; raises UsageError when it is not a readable zqbench run."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: not a run folder (no such directory)")
    summary_path = path / SUMMARY_JSON
    if not summary_path.is_file():
        raise UsageError(f"{path}: not a run folder (no {SUMMARY_JSON})")
    try:
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{summary_path}: unreadable ({exc})") from exc
    if not isinstance(summary, dict) or summary.get("schema") != SCHEMA:
        found = summary.get("schema") if isinstance(summary, dict) else None
        raise UsageError(f"{summary_path}: schema {found!r}, expected {SCHEMA!r}")
    has_samples = (path / recorder.PARQUET_NAME).is_file() or any(path.glob(recorder.STREAM_GLOB))
    if need_samples and not has_samples:
        raise UsageError(f"{path}: not a run folder (no {recorder.PARQUET_NAME})")
    return SavedRun(path, summary)


def run_info(summary: dict[str, Any]) -> RunInfo:
    """The RunInfo a run was summarised with, rebuilt from its summary.json.

    Everything `summarize` reads besides the samples is saved in summary.json: the clock,
    the stages, the offered load, the validity thresholds and the telemetry scalars."""
    clock = summary["clock"]
    load = summary.get("load", {})
    thresholds = summary.get("validity", {}).get("thresholds", {})
    known = ValidityThresholds.__dataclass_fields__
    return RunInfo(
        scenario=summary["scenario"]["name"],
        target=summary["target"],
        api=summary["api"],
        started_at=summary["started_at"],
        start_monotonic_ns=int(clock["start_monotonic_ns"]),
        start_epoch_ns=int(clock["start_epoch_ns"]),
        duration_s=float(summary["duration"]),
        open_loop=bool(load.get("open_loop", True)),
        scenario_config=summary["scenario"].get("config", {}),
        offered_requests=load.get("offered_requests"),
        offered_rate=load.get("offered_rate"),
        environment=summary.get("environment", {}),
        stages=[
            StageInfo(s["name"], float(s["start"]), float(s["end"]), s.get("target_rate"))
            for s in summary.get("stages", [])
        ],
        validity=ValidityThresholds(**{k: v for k, v in thresholds.items() if k in known}),
        clock_offset_ns=int(clock.get("server_offset_ns", 0)),
        clock_offset_source=str(clock.get("server_offset_source", "same host")),
        telemetry=summary.get("telemetry", {}),
    )
