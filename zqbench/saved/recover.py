"""A run that was killed before it wrote summary.json, recovered from what is on disk.

    if unfinished(folder):
        summary, frame = recover_run(folder)

The workers' Arrow streams (samples.w<N>.arrows) keep every batch flushed before the kill;
they are merged into samples.parquet (zqbench.samples.writer). run-start.json, written at the
run's t = 0, says what the run was (scenario, target, clock, stages, SLOs); without it
those are `unknown`. The summary covers the samples on disk, its duration runs to the last
of them, and it is marked interrupted: `environment.interrupted` is true and the verdict is
`invalid`, its first reason saying what was recovered and what is not known.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zqbench.errors import UsageError
from zqbench.metrics.frame import MetricFrame, Samples
from zqbench.metrics.slo import Slo, parse_slos
from zqbench.metrics.summarize import RunInfo, run_frame, summarize_frame
from zqbench.outputs.paths import RUN_START_JSON, SUMMARY_JSON
from zqbench.outputs.start_record import read_start
from zqbench.samples import writer
from zqbench.samples.columns import SampleColumns, give_back
from zqbench.summary import AtRest, Summary, TargetResolution

UNKNOWN = "unknown"
UNKNOWN_RUN = RunInfo(  # a run without its record: nothing known but its samples
    scenario=UNKNOWN,
    target=UNKNOWN,
    api=UNKNOWN,
    started_at=UNKNOWN,
    start_monotonic_ns=0,
    start_epoch_ns=0,
    duration_s=0.0,
    clock_offset_source=UNKNOWN,
)


def unfinished(folder: Path) -> bool:
    """A run folder with samples but no summary.json: a run that did not finish."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / SUMMARY_JSON).exists():
        return False
    return (folder / writer.PARQUET_NAME).is_file() or any(folder.glob(writer.STREAM_GLOB))


def recover_run(folder: Path) -> tuple[Summary, MetricFrame]:
    """The summary of the samples on disk (now in samples.parquet), marked interrupted, and
    the frame it was computed from."""
    folder = Path(folder)
    record = _read_record(folder)
    info, slos = record if record is not None else (UNKNOWN_RUN, [])
    if any(folder.glob(writer.STREAM_GLOB)):
        clock = {"start_monotonic_ns": info.start_monotonic_ns}
        if record is not None:
            clock["start_epoch_ns"] = info.start_epoch_ns
        writer.finalize(folder, {"zqbench.clock." + k: str(v) for k, v in clock.items()})
    parquet = writer.checked_file(folder)
    give_back()  # the merge's table, before the frame is built
    # A column at a time, as a run's analysis reads them (zqbench.samples.columns).
    samples: Samples = (
        SampleColumns(parquet) if parquet is not None else writer.load_samples(folder).to_pandas()
    )
    unknown = [] if record is not None else ["scenario", "target", "clock", "schedule", "SLOs"]
    info = dataclasses.replace(
        info,
        # to the last recorded request's end (0 with none)
        duration_s=float(samples["t_end"].max()) / 1e9 if len(samples) else 0.0,
        environment={
            **info.environment,
            "interrupted": True,
            "recovered": {"samples": len(samples), "unknown": unknown},
        },
    )
    frame = run_frame(samples, info)
    if frame.outcomes is not None and "outcome" not in samples.columns:
        # As the run's analysis would have: each request's outcome beside its sample.
        writer.add_columns(folder, frame.outcomes.columns())
    give_back()
    summary = summarize_frame(frame, run=info, slos=slos)
    give_back()
    why = "is unreadable" if (folder / RUN_START_JSON).exists() else "is missing"
    return _marked_interrupted(summary, len(samples), unknown, why), frame


def _read_record(folder: Path) -> tuple[RunInfo, list[Slo]] | None:
    """run-start.json's run and SLOs, or None when it is missing or damaged. read_start
    checks RunInfo's types; the parts the summary reads further are checked here as it will
    read them (its SLOs parsed, its target resolution and at-rest baseline whole), so a
    damaged record is recovered as unknown, never an internal error (#44 item 5)."""
    record = read_start(folder)
    if record is None:
        return None
    info, texts = record
    try:
        slos = parse_slos(list(texts))
        if info.target_resolution is not None:
            TargetResolution.model_validate(info.target_resolution)
    except (UsageError, ValueError):  # pydantic's ValidationError is a ValueError
        return None
    basis = info.outcome_basis
    if basis is not None and isinstance(basis.at_rest, AtRest) and not basis.at_rest.probes:
        return None  # a baseline fitted on no probe: none a run writes
    return info, slos


def _marked_interrupted(summary: Summary, n: int, unknown: list[str], why: str) -> Summary:
    reason = (
        f"interrupted: the run was stopped before it finished; {n} samples were recovered "
        f"from its sample streams by `zqbench report`"
    )
    if unknown:
        reason += f" ({', '.join(unknown)} not known: {RUN_START_JSON} {why})"
    validity = summary.validity.model_copy(
        update={"ok": False, "reasons": [reason, *summary.validity.reasons]}
    )
    return summary.model_copy(update={"verdict": "invalid", "validity": validity})
