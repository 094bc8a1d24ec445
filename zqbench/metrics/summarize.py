"""summarize(): every number a report shows, computed once from the samples.

    summarize(samples, run=RunInfo(...), slos=["latency:p99<150ms"]) -> Summary

The result is the typed summary.json (zqbench.summary, where its JSON conventions are
written down). Durations are seconds (floats). Percentiles are nearest-rank order
statistics (quantiles.py) with 95% distribution-free CIs for p50 and p99. A metric with
no value at all is unavailable with a reason, never zeros.

Everything is vectorised numpy: one sort per metric and group, no per-row Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from zqbench import summary as model
from zqbench.load.spans import StageInfo
from zqbench.metrics import quantiles
from zqbench.metrics.frame import (
    NS_PER_S,
    MetricFrame,
    Samples,
    build_frame,
    goodput_count,
)
from zqbench.metrics.head_of_line import head_of_line
from zqbench.metrics.migration import (
    migration,
    over_time,
    retry_after,
    status_counts,
    status_shares,
)
from zqbench.metrics.outcomes import classify_frame
from zqbench.metrics.sections import SECTIONS
from zqbench.metrics.sig_digits import significant
from zqbench.metrics.slo import (
    Evidence,
    Slo,
    evaluate_slo,
    goodput_bounds,
    parse_slos,
    run_verdict,
)
from zqbench.summary import json_number

PERCENTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
CI_PERCENTILES = ("p50", "p99")
RATIO_METRICS = ("latency", "ttft")


@dataclass(frozen=True)
class ValidityThresholds:
    """When a run is invalid rather than slow (all configurable)."""

    max_schedule_lag_p99_s: float = 0.010  # the generator fell behind its schedule
    # The client fell behind its streams (client_lag); None: a run saved before the probe.
    # A client hopelessly behind is hundreds of ms late; a busy machine's scheduler alone
    # makes an idle loop's p99 10 ms (measured on this 2-core host with the suite running).
    max_client_lag_p99_s: float | None = 0.050
    min_achieved_ratio: float = 0.97  # achieved / offered load
    min_samples: int = 100  # requests sent
    min_ratio_samples: int = 100  # per class, for p99/p50 ratios


@dataclass(frozen=True)
class RunInfo:
    """What the run knows besides its samples."""

    scenario: str
    target: str  # URL, already without credentials
    api: str
    started_at: str  # ISO 8601, UTC
    start_monotonic_ns: int
    start_epoch_ns: int
    duration_s: float
    loop: model.Loop = "open"  # the executor's (zqbench.load.LoadPlan.loop)
    scenario_config: Mapping[str, Any] = field(default_factory=dict)
    offered_requests: int | None = None  # the schedule's request count (open loop)
    offered_rate: float | None = None  # req/s the schedule offered (mean over the run)
    environment: Mapping[str, Any] = field(default_factory=dict)
    stages: Sequence[StageInfo] = ()
    validity: ValidityThresholds = field(default_factory=ValidityThresholds)
    clock_offset_ns: int = 0  # server clock minus client clock
    clock_offset_source: str = "same host"
    telemetry: Mapping[str, float] = field(default_factory=dict)  # e.g. {"gpu_density": 0.9}
    # From the server's own metrics.
    server_queue: model.ServerQueue | model.Unavailable | None = None
    # How the model and API were chosen (summary.TargetResolution's fields), when known.
    target_resolution: Mapping[str, Any] | None = None
    # zqbench.impair.packet_loss_record, from the samples.
    packet_loss: model.PacketLoss | None = None
    # How each request's outcome is judged (zqbench.metrics.classify); None: not judged
    # (a run saved before zqbench judged outcomes keeps its summary as it was)
    outcome_basis: model.OutcomeBasis | None = None
    stop: model.Stop | None = None  # what the scenario's [stop] rules ended; None: no rules
    # How late the workers' loops ran a ready timer (zqbench.engines.loop_lag), p99 and the
    # largest, s; None: not probed (a run saved before the probe, remote workers)
    client_lag_p99_s: float | None = None
    client_lag_max_s: float | None = None
    # The requests sent when the load stopped at the row bound before its end; None: it
    # did not (zqbench.pipeline.execute.max_sends)
    stopped_at_bound: int | None = None


def stats(sorted_s: np.ndarray) -> model.Stats:
    """n, mean, min, p50..p999, max and the p50/p99 CIs of an ascending array (seconds)."""
    n = len(sorted_s)
    if n == 0:
        return model.Stats(n=0)
    ci = {}
    for name in CI_PERCENTILES:
        low, high = quantiles.quantile_ci(sorted_s, PERCENTILES[name])
        ci[name] = (json_number(low), json_number(high))
    return model.Stats(
        n=n,
        mean=json_number(float(np.mean(sorted_s))),
        min=json_number(float(sorted_s[0])),
        **{name: json_number(quantiles.quantile(sorted_s, q)) for name, q in PERCENTILES.items()},
        max=json_number(float(sorted_s[-1])),
        ci=model.Ci(**ci),
    )


def metric_summary(frame: MetricFrame, name: str) -> model.MetricStats:
    """Overall stats plus by_stage / by_class breakdowns of one duration metric."""
    reason = frame.unavailable_reason(name)
    if reason is not None:
        return model.MetricStats(n=0, unavailable=reason)
    overall, by_stage, by_class = frame.grouped_sorted_seconds(name)
    return model.MetricStats(
        **dict(stats(overall)),
        by_stage={str(stage): stats(values) for stage, values in by_stage.items()},
        by_class={cls: stats(values) for cls, values in by_class.items()},
    )


def ratio_summary(frame: MetricFrame, name: str, min_samples: int) -> model.Ratio:
    """p99/p50 of a metric per request class; the run's value is the worst class with at
    least `min_samples` values (a mix of lengths is not one distribution)."""
    by_class: dict[str, model.ClassRatio] = {}
    worst: tuple[float, str] | None = None
    for cls in frame.classes:
        values = frame.sorted_seconds(name, frame.mask(request_class=cls))
        p50 = quantiles.quantile(values, 0.5)
        p99 = quantiles.quantile(values, 0.99)
        ratio = None if not p50 or p99 is None else p99 / p50
        by_class[cls] = model.ClassRatio(p99_p50=json_number(ratio), n=len(values))
        if ratio is not None and len(values) >= min_samples and (worst is None or ratio > worst[0]):
            worst = (ratio, cls)
    return model.Ratio(
        p99_p50=None if worst is None else json_number(worst[0]),
        worst_class=None if worst is None else worst[1],
        min_samples=min_samples,
        by_class=by_class,
    )


def status_mix(frame: MetricFrame, duration_s: float) -> model.StatusMix:
    """Counts and shares of each status key, overall, per stage and over time."""
    keys = frame.status_keys
    overall = status_counts(keys)
    total = max(1, frame.n)
    by_stage = {}
    for stage in frame.stages:
        staged = keys[frame.stage == stage]
        by_stage[str(stage)] = model.StageStatus(
            counts=status_counts(staged), share=status_shares(staged)
        )
    # Over time, the most frequent key first (a tie: the one sent first).
    order = sorted(pd.unique(keys), key=lambda k: -np.count_nonzero(keys == k))
    return model.StatusMix(
        share={k: v / total for k, v in overall.items()},
        by_stage=by_stage,
        over_time=over_time(frame, duration_s, keys, order),
    )


def load_summary(frame: MetricFrame, run: RunInfo) -> model.Load:
    """Offered versus achieved load, in req/s.

    Open loop (the schedule's count and mean rate known): achieved_rate = sent / the
    schedule's duration (offered_requests / offered_rate), over the same span as the
    offered rate, so it never exceeds it; achieved_ratio = sent / offered_requests.
    Otherwise achieved_rate = (sent - 1) / (last t_send - first t_send), and
    achieved_ratio = achieved_rate / offered_rate when a rate was offered, else null.
    (The span between the first and the last send is shorter than the schedule whenever
    it starts or ends slowly, a ramp from 0: over it, a generator that kept up exactly
    looked faster than the schedule.)"""
    sent = frame.n
    ratio = sent / run.offered_requests if run.offered_requests else None
    if run.offered_requests and run.offered_rate:
        achieved_rate: float | None = sent / (run.offered_requests / run.offered_rate)
    else:
        t_send = frame.columns.t_send
        span_s = (float(np.max(t_send)) - float(np.min(t_send))) / NS_PER_S if sent else 0.0
        achieved_rate = (sent - 1) / span_s if sent > 1 and span_s > 0 else None
        if ratio is None and run.offered_rate and achieved_rate is not None:
            ratio = achieved_rate / run.offered_rate
    return model.Load(
        loop=run.loop,
        offered_requests=run.offered_requests,
        offered_rate=run.offered_rate,
        achieved_rate=achieved_rate,
        achieved_ratio=ratio,
        client_lag_p99_s=run.client_lag_p99_s,
        client_lag_max_s=run.client_lag_max_s,
        stopped_at_bound=run.stopped_at_bound,
    )


def _ms(seconds: float) -> str:
    return f"{significant(seconds * 1e3, 3)} ms"


def validity(frame: MetricFrame, run: RunInfo, load: model.Load) -> model.Validity:
    """A run is invalid, not merely slow, when the generator could not hold the schedule
    (schedule_lag p99 over its limit, or achieved/offered load under its limit) or when
    it sent too few requests to say anything. A run a [stop] rule ended has said what it
    found (the rule judged its own window, at least its min_requests): few samples do not
    make it invalid, a generator that fell behind still does."""
    limits = run.validity
    reasons = []
    stopped = run.stop is not None and bool(run.stop.events)
    if frame.n < limits.min_samples and not stopped:
        reasons.append(
            f"only {frame.n} requests were sent; a valid run needs at least {limits.min_samples}"
        )
    if frame.unavailable_reason("schedule_lag") is None:
        lag = quantiles.quantile(frame.sorted_seconds("schedule_lag"), 0.99)
        if lag is not None and lag > limits.max_schedule_lag_p99_s:
            reasons.append(
                f"the generator fell behind its schedule: schedule_lag p99 = {_ms(lag)}"
                f" > {_ms(limits.max_schedule_lag_p99_s)}"
            )
    client, client_limit = run.client_lag_p99_s, limits.max_client_lag_p99_s
    if client is not None and client_limit is not None and client > client_limit:
        reasons.append(
            f"the client fell behind its streams: client_lag p99 = {_ms(client)} > "
            f"{_ms(client_limit)} (its event loop ran what was ready that late, so token "
            "times are late by as much: give it --workers, or less load)"
        )
    ratio = load.achieved_ratio
    if ratio is not None and ratio < limits.min_achieved_ratio:
        reasons.append(
            f"the generator achieved {ratio:.1%} of the offered load"
            f" (< {limits.min_achieved_ratio:.0%})"
        )
    return model.Validity(
        ok=not reasons, reasons=reasons, thresholds=model.Thresholds(**asdict(limits))
    )


def stage_record(index: int, stage: StageInfo) -> model.Stage:
    classes = None if stage.classes is None else list(stage.classes)
    return model.Stage(
        index=index,
        name=stage.name,
        start=stage.start_s,
        end=stage.end_s,
        target_rate=stage.target_rate,
        classes=classes,
    )


def throughput(frame: MetricFrame, evidence: Evidence, good: int) -> model.Throughput:
    """Requests, goodput and output tokens per second of run duration (null if 0 s)."""
    tokens = frame.columns.output_tokens[frame.ok]
    counted = evidence.duration_s > 0 and not np.all(np.isnan(tokens))
    return model.Throughput(
        requests_per_s=evidence.throughput,
        goodput_per_s=evidence.goodput,
        goodput_requests=good,
        output_tokens_per_s=float(np.nansum(tokens)) / evidence.duration_s if counted else None,
    )


def summarize(samples: Samples, *, run: RunInfo, slos: Sequence[str]) -> model.Summary:
    """The summary of a run from its samples and SLO expressions (`zqbench gate`, tests).

    Raises UsageError for a bad SLO expression."""
    return summarize_frame(run_frame(samples, run), run=run, slos=parse_slos(list(slos)))


def run_frame(samples: Samples, run: RunInfo) -> MetricFrame:
    """The per-request metric frame on the run's clock anchor and server offset, with
    each request's outcome when the run judges them."""
    frame = build_frame(
        samples, start_epoch_ns=run.start_epoch_ns, clock_offset_ns=run.clock_offset_ns
    )
    if run.outcome_basis is None:
        return frame
    outcomes = classify_frame(frame, run.outcome_basis, run.server_queue)
    return dataclasses.replace(frame, outcomes=outcomes)


def summarize_frame(frame: MetricFrame, *, run: RunInfo, slos: Sequence[Slo]) -> model.Summary:
    """The summary of a run: what summary.json holds. A run builds its frame once and
    parses its SLOs once (the plan stage); the report's figures read the same frame."""
    ok = int(np.count_nonzero(frame.ok))
    duration = run.duration_s if run.duration_s > 0 else None
    good = goodput_count(frame, goodput_bounds(slos))
    evidence = Evidence(
        duration_s=run.duration_s,
        goodput=None if duration is None else good / duration,
        throughput=None if duration is None else ok / duration,
        telemetry=dict(run.telemetry),
        min_ratio_samples=run.validity.min_ratio_samples,
    )
    results = [evaluate_slo(slo, frame, evidence) for slo in slos]
    load = load_summary(frame, run)
    valid = validity(frame, run, load)
    return model.Summary(
        verdict=run_verdict(
            valid.ok, results, stopped=run.stop is not None and bool(run.stop.events)
        ),
        scenario=model.ScenarioInfo(name=run.scenario, config=dict(run.scenario_config)),
        target=run.target,
        api=run.api,
        started_at=run.started_at,
        duration=run.duration_s,
        clock=model.Clock(
            start_monotonic_ns=run.start_monotonic_ns,
            start_epoch_ns=run.start_epoch_ns,
            server_offset_ns=run.clock_offset_ns,
            server_offset_source=run.clock_offset_source,
        ),
        environment=dict(run.environment),
        stages=[stage_record(i, s) for i, s in enumerate(run.stages)],
        load=load,
        requests=model.Requests(sent=frame.n, ok=ok, failed=frame.n - ok),
        throughput=throughput(frame, evidence, good),
        status_codes=status_counts(frame.status_keys),
        status_mix=status_mix(frame, run.duration_s),
        migration=migration(frame, [(s.name, s.start_s, s.end_s) for s in run.stages]),
        retry_after=retry_after(frame, frame.retry_after_s),
        head_of_line=head_of_line(frame, [s.classes for s in run.stages]),
        metrics={name: metric_summary(frame, name) for name in frame.listed_metrics()},
        ratios={
            name: ratio_summary(frame, name, run.validity.min_ratio_samples)
            for name in RATIO_METRICS
        },
        telemetry=dict(run.telemetry),
        slos=results,
        validity=valid,
        target_resolution=(
            None
            if run.target_resolution is None
            else model.TargetResolution.model_validate(run.target_resolution)
        ),
        **{s.name: s.compute(frame, run) for s in SECTIONS if s.compute is not None},
    )
