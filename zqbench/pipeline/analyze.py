"""Stage 4, analyze: the samples on disk -> the run's summary.

The workers' files become samples.parquet, stamped with the run's clock anchor, and
`summarize` computes every metric, the validity checks and the SLO verdicts from it. A run
with a packet-loss impairment also gets what the loss did (zqbench.impair.analysis), from
the samples and the windows the hook recorded.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

import zqbench
from zqbench.engines import loop_lag
from zqbench.impair import PacketLossHook, packet_loss_record
from zqbench.metrics.frame import MetricFrame
from zqbench.metrics.retry_after_honesty import follow_up_summary
from zqbench.metrics.summarize import RunInfo, ValidityThresholds, run_frame, summarize_frame
from zqbench.pipeline.execute import Execution
from zqbench.pipeline.options import PlanOptions, ValidityOptions
from zqbench.pipeline.plan import Plan
from zqbench.pipeline.target import Target
from zqbench.redact import redact_url
from zqbench.samples import follow_up_file, writer
from zqbench.samples.columns import SampleColumns, give_back
from zqbench.scenario import OutcomesConfig, ValidityConfig
from zqbench.summary import Summary

T = TypeVar("T")


@dataclass(frozen=True)
class Analysis:
    summary: Summary
    frame: MetricFrame  # its per-request metrics, built once for the summary and the report


def analyze(
    options: PlanOptions,
    validity: ValidityOptions,
    plan: Plan,
    target: Target,
    execution: Execution,
    out_dir: Path,
) -> Analysis:
    clock = {"start_monotonic_ns": execution.start_ns, "start_epoch_ns": execution.start_epoch_ns}
    metadata = {"zqbench.clock." + k: str(v) for k, v in clock.items()}
    # Read a column at a time: the frame keeps what it needs of each, and neither the table
    # nor a DataFrame of it is held beside the frame (#44).
    samples = SampleColumns(writer.finalize(out_dir, metadata, execution.sample_files))
    give_back()  # the merge's table, before the frame is built
    # The run's record: what it knew at t = 0, then what the load and the hooks report.
    at_start = start_info(
        options,
        validity,
        plan,
        target,
        start_ns=execution.start_ns,
        start_epoch_ns=execution.start_epoch_ns,
    )
    environment = dict(at_start.environment)
    environment["prompts"] = {**environment["prompts"], "bytes": execution.prompt_bytes}
    if execution.request_source != {"source": "synthetic"}:  # plain synthetic: as before
        environment["request_source"] = execution.request_source
    offered = at_start.offered_requests
    if offered is not None and execution.stop is not None and execution.stop.not_sent:
        # What a rule left unsent was never offered: the achieved ratio is of the rest.
        offered = max(0, offered - execution.stop.not_sent)
    info = dataclasses.replace(
        at_start,
        offered_requests=offered,
        stop=execution.stop,
        duration_s=(execution.end_ns - execution.start_ns) / 1e9,
        environment={
            **environment,
            "interrupted": execution.interrupted,
            **execution.hooks.environment,
        },
        telemetry=execution.hooks.telemetry,
        server_queue=execution.hooks.server_queue,
        # What packet loss did needs the samples and the rules' real windows (its hook's record).
        packet_loss=packet_loss_record(
            samples, plan.stages, execution.hooks.environment.get(PacketLossHook.name)
        ),
    )
    lag = loop_lag.merged(sorted(out_dir.glob(loop_lag.FILE_PATTERN)))
    if lag is not None:
        info = dataclasses.replace(
            info, client_lag_p99_s=lag.quantile_s(0.99), client_lag_max_s=lag.max_ns / 1e9
        )
    if execution.stopped_at_bound is not None:
        info = dataclasses.replace(info, stopped_at_bound=execution.stopped_at_bound)
    if execution.distributed is not None:
        info = execution.distributed.adjust(info)
    frame = run_frame(samples, info)
    if frame.outcomes is not None:
        writer.add_columns(out_dir, frame.outcomes.columns())
    give_back()  # the columns read and written, before the summary's sorts and the figures
    summary = summarize_frame(frame, run=info, slos=plan.slo_checks)
    summary = _with_follow_ups(summary, target.scenario.outcomes, out_dir)
    if execution.distributed is not None:
        lags = samples.frame(("worker", "t_send", "t_intended"))  # each worker's schedule_lag
        summary = execution.distributed.attach(summary, lags)
    give_back()  # the summary's sorts, before the figures
    return Analysis(summary, frame)


def _with_follow_ups(summary: Summary, config: OutcomesConfig, out_dir: Path) -> Summary:
    """The Retry-After follow-ups' tries into retry_after.parquet and their summary."""
    if not config.retry_after_follow_ups:
        return summary
    tries = follow_up_file.collect(out_dir)
    section = follow_up_summary(
        tries if tries is not None else pd.DataFrame(columns=follow_up_file.TRY_SCHEMA.names),
        asked=config.retry_after_follow_ups,
        attempts=config.retry_after_attempts,
    )
    return summary.model_copy(update={"retry_after_follow_up": section})


def start_info(
    options: PlanOptions,
    validity: ValidityOptions,
    plan: Plan,
    target: Target,
    start_ns: int,
    start_epoch_ns: int,
) -> RunInfo:
    """What the run knows at its t = 0: everything but its duration and what the load and
    the hooks report (run-start.json, from which a killed run is recovered)."""
    scenario = target.scenario
    return RunInfo(
        scenario=scenario.name,
        target=redact_url(target.base_url),
        api=scenario.api,
        started_at=plan.started_at.isoformat(timespec="seconds"),
        start_monotonic_ns=start_ns,
        start_epoch_ns=start_epoch_ns,
        duration_s=0.0,
        loop=plan.load.loop,
        scenario_config=scenario.to_dict(),
        offered_requests=plan.offered or None,
        offered_rate=plan.offered_rate or None,
        environment=_environment(options, target),
        stages=plan.stages,
        validity=validity_thresholds(validity, scenario.validity),
        target_resolution=(
            None if target.resolution is None else target.resolution.model_dump(mode="json")
        ),
        # Known before the load, so a killed run recovered from run-start.json judges alike.
        outcome_basis=target.outcome_basis(),
    )


def validity_thresholds(options: ValidityOptions, scenario: ValidityConfig) -> ValidityThresholds:
    """Each limit from the options, else the scenario's [validity], else the default."""
    d = ValidityThresholds()
    return ValidityThresholds(
        min_samples=_first(options.min_samples, scenario.min_samples, d.min_samples),
        max_schedule_lag_p99_s=_first(
            options.max_schedule_lag_s, scenario.max_schedule_lag_s, d.max_schedule_lag_p99_s
        ),
        max_client_lag_p99_s=_first(
            options.max_client_lag_s, scenario.max_client_lag_s, d.max_client_lag_p99_s
        ),
        min_achieved_ratio=_first(
            options.min_achieved_ratio, scenario.min_achieved_ratio, d.min_achieved_ratio
        ),
        min_ratio_samples=_first(
            options.min_ratio_samples, scenario.min_ratio_samples, d.min_ratio_samples
        ),
    )


def _first(option: T | None, scenario: T | None, default: T) -> T:
    return option if option is not None else scenario if scenario is not None else default


def _environment(options: PlanOptions, target: Target) -> dict[str, Any]:
    """Where and how the run ran: versions, machine, options, prompts."""
    env: dict[str, Any] = {
        "zqbench": zqbench.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "hostname": socket.gethostname(),
        "workers": options.workers,
        "http2": target.access.http2,
        "seed": options.seed,
        "rate_scale": options.rate_scale,
        "duration_scale": options.duration_scale,
    }
    if target.server is not None:
        env["reference_server"] = {
            k: target.server.health.get(k) for k in ("engine", "scheduler", "device", "model")
        }
    calibration = target.calibration
    env["prompts"] = {
        "max_context": target.max_context,
        "clamped": list(target.clamped),
        "warnings": list(target.warnings),
        "calibration": None if calibration is None else dataclasses.asdict(calibration),
    }
    return env
