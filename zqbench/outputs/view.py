"""The view model of a saved run: what report.html and summary.md show, formatted once.

    view = build_view(summary, figures)   # -> ReportView: frozen dataclasses of strings

A renderer of the saved summary: it computes nothing new. Every string from the run is
redacted first; every number is formatted here, once for both templates: durations in ms
with 4 significant digits, "–" for no value (never 0), "∞" for a percentile that lands on
a failure (the error-adjusted latency). The templates (outputs/templates/) only lay the
view out. This module is the only reader of the summary for those two outputs; it reads
the typed Summary (zqbench.summary, imported as `model` because several view classes share
a name with the part of the summary they show).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from zqbench import summary as model
from zqbench.errors import UsageError
from zqbench.metrics.sig_digits import significant
from zqbench.metrics.slo import format_value, parse_slo
from zqbench.outputs.json_out import redacted
from zqbench.outputs.outcomes_view import (
    OutcomesView,
    cut_at_end_text,
    outcomes_view,
    resent_text,
)
from zqbench.outputs.stop_view import stop_lines
from zqbench.summary import JsonFloat, Summary

_T = TypeVar("_T")

VERDICT_BADGE = {
    "pass": "✅ PASS",
    "fail": "❌ FAIL",
    "inconclusive": "⚠️ INCONCLUSIVE",
    "invalid": "🚫 INVALID",
}
KEY_METRICS = (
    "latency",
    "latency_error_adjusted",
    "latency_corrected",
    "ttfb",
    "ttft",
    "tpot",
    "itl",
    "time_to_reject",
    "schedule_lag",
    "server_queue",
    "dispatch_delay",
    "dispatch_jitter",
)
NO_VALUE = "–"
# A figure as outputs/plots.py hands it over: (name, title, caption, PNG bytes).
FigureData = tuple[str, str, str, bytes]


@dataclass(frozen=True)
class Headline:
    """Who ran what against which target, and the verdict: the title, banner, first lines."""

    verdict: str  # pass | fail | inconclusive | invalid
    badge: str  # the verdict with its emoji, "✅ PASS"
    scenario: str
    target: str
    api: str
    started_at: str
    sent: str
    ok: str
    failed: str
    duration_s: str  # one decimal
    ok_rate: str | None  # req/s, one decimal; None when the summary has none
    goodput: str | None  # req/s, one decimal
    resolution: str | None  # how the model and API were chosen; None when not recorded


@dataclass(frozen=True)
class Fact:
    """One labelled value of the run (run facts, environment, telemetry), or an unavailable
    metric and why it has no value."""

    label: str
    value: str


@dataclass(frozen=True)
class SloRow:
    """One SLO: value, threshold and 95% CI in the unit the SLO was written in."""

    expr: str
    verdict: str
    badge: str
    value: str
    threshold: str
    ci: str
    message: str  # the gate's own sentence


@dataclass(frozen=True)
class MetricRow:
    """Percentiles (ms) of one metric over one group: all requests, a stage or a class."""

    metric: str
    group: str  # "all", "stage 1 (burst)", "class short"
    n: str
    p50: str
    p90: str
    p99: str
    p999: str
    maximum: str
    p50_ci: str  # "[lo, hi]" in ms, or "" when the summary has no CI
    p99_ci: str


@dataclass(frozen=True)
class RatioRow:
    """The p99/p50 ratio of a metric in its worst request class."""

    metric: str
    p99_p50: str
    worst_class: str


@dataclass(frozen=True)
class StatusRow:
    """One status key of the whole run: its request count and share of the requests sent."""

    status: str
    count: str
    share: str


@dataclass(frozen=True)
class StageStatusRow:
    """One stage's request count and the share of each status, in StageStatus.statuses order."""

    stage: str
    n: str
    shares: tuple[str, ...]


@dataclass(frozen=True)
class StageStatus:
    """The status mix per stage: one column per status key (the run's, most frequent
    first), one row per stage."""

    statuses: tuple[str, ...]
    rows: tuple[StageStatusRow, ...]


@dataclass(frozen=True)
class MigrationRow:
    """One line of the migration table: a measure or a status share, in each stage."""

    label: str
    baseline: str
    overload: str
    is_status: bool  # a status share (the label is a status code), not a measure


@dataclass(frozen=True)
class Migration:
    """Error migration: the status mix and latency of the baseline vs the overload stage."""

    baseline: str  # "stage 0 (baseline, 2.5 req/s)"
    overload: str
    rows: tuple[MigrationRow, ...]


@dataclass(frozen=True)
class HeadOfLineRow:
    """One class and metric, baseline vs mixed stage; latencies in ms, ratios mixed/baseline."""

    request_class: str
    metric: str
    baseline_p50: str
    mixed_p50: str
    ratio_p50: str
    baseline_p99: str
    mixed_p99: str
    ratio_p99: str


@dataclass(frozen=True)
class HeadOfLine:
    """Head-of-line blocking: each class's latency and ttft in the mixed stage, against the
    baseline stage where it ran alone (stage indexes)."""

    mixed_stage: str
    baseline_stage: str
    rows: tuple[HeadOfLineRow, ...]


@dataclass(frozen=True)
class TurnRow:
    turn: str
    requests: str
    ok: str
    ttft_p50: str  # ms
    ttft_p99: str
    latency_p50: str
    latency_p99: str
    prompt_tokens: str  # mean of the successful ones


@dataclass(frozen=True)
class SessionsView:
    """A sessions run: how many conversations, how long, and each turn as context grows."""

    facts: tuple[Fact, ...]
    rows: tuple[TurnRow, ...]


@dataclass(frozen=True)
class Refusals:
    """Requests refused with 429/503/529: how fast, and how many carried Retry-After."""

    refused: str
    reject_p50: str  # ms
    reject_p99: str  # ms
    retry_after: str  # share of the refusals
    follow_up: str | None = None  # the Retry-After follow-ups, one sentence; None: none asked


@dataclass(frozen=True)
class StageRow:
    """One scenario stage: its bounds (s since the start) and configured rate (req/s)."""

    index: str
    name: str
    start_s: str
    end_s: str
    target_rate: str


@dataclass(frozen=True)
class Figure:
    """A figure embedded in the page: `src` is a data: URI, so the page needs no file."""

    name: str
    title: str
    caption: str
    src: str


@dataclass(frozen=True)
class ServerQueue:
    """The server's own account of its queue, from its /metrics during the run: one row
    per quantity (requests waiting, running, queue time), or why the run has none. The
    pages say where it came from: "From vLLM's /metrics (vllm:num_requests_waiting, ...)"."""

    engine: str  # "vLLM"; "" when none
    metrics: tuple[str, ...]  # the engine's names of the quantities shown
    url: str
    rows: tuple[Fact, ...]
    unavailable: str | None  # why there are no figures (no engine at /metrics, ...)
    figure: Figure | None  # waiting and running requests over time


@dataclass(frozen=True)
class LossStageRow:
    """One stage of a packet-loss run: requests, errors and latency P99 against baseline."""

    stage: str  # "stage 1 (loss)"
    impaired: bool
    requests: str
    errors: str
    error_share: str
    p99: str  # ms
    ratio: str  # the stage's P99 over the baseline P99, "13×"


@dataclass(frozen=True)
class PacketLoss:
    """What a [network] packet-loss impairment did: the loss and its window, P99 under loss
    against baseline, the error share and the recovery time; one row per stage."""

    rows: tuple[Fact, ...]
    stages: tuple[LossStageRow, ...]
    figure: Figure | None  # latency and rolling P99 over send time, the loss shaded


@dataclass(frozen=True)
class WorkerRow:
    """One worker of a --distributed run: what it sent and the master received, its clock
    against the master's, its own schedule lag, how it ended and what of it never came."""

    worker: str  # "1 (host-b)"
    sent: str
    recorded: str  # samples the master received from it
    clock: str  # "+12.3 µs ± 4.0 µs": the master's clock minus the worker's
    lag_p99: str  # ms
    state: str  # done | stopped | lost
    missing: str  # the slice it did not send, in words; "" when none


@dataclass(frozen=True)
class Workers:
    """The workers of a --distributed run (summary.json's `distributed`)."""

    master: str
    lost: str  # "none", or the requests and share lost with their workers
    rows: tuple[WorkerRow, ...]


@dataclass(frozen=True)
class ReportView:
    """Every section of report.html and summary.md; empty or None when the run lacks it."""

    headline: Headline
    invalid_reasons: tuple[str, ...] | None  # None for a valid run
    stops: tuple[str, ...]  # what the [stop] rules ended (outputs/stop_view.py); ()
    cut_at_end: str | None  # the requests the run's end cut, in a sentence; None: none
    resent: str | None  # the requests sent again on a new connection, in a sentence; None: none
    slos: tuple[SloRow, ...]
    metrics: tuple[MetricRow, ...]
    unavailable: tuple[Fact, ...]  # metric: why it has no value (never shown as zero)
    ratios: tuple[RatioRow, ...]
    status: tuple[StatusRow, ...]
    status_by_stage: StageStatus | None  # None with fewer than two stages
    migration: Migration | None
    head_of_line: HeadOfLine | None
    refusals: Refusals | None
    facts: tuple[Fact, ...]
    stages: tuple[StageRow, ...]
    environment: tuple[Fact, ...]
    telemetry: tuple[Fact, ...]
    server_queue: ServerQueue | None  # None: the run did not look (a summary from before)
    prefix_cache: tuple[Fact, ...]  # the server's counters, the usage; () when absent
    sessions: SessionsView | None  # None: not a sessions run
    outcomes: OutcomesView | None  # None: the run judged none (saved before outcomes)
    packet_loss: PacketLoss | None  # None: the run had no packet-loss impairment
    profile: model.Profile | None  # None: not a `zqbench profile` run
    workers: Workers | None  # None: not a --distributed run
    figures: tuple[Figure, ...]  # all but those the sections above hold


SERVER_QUEUE_FIGURE = "server_queue"  # outputs/plots.py's names for them
PACKET_LOSS_FIGURE = "packet_loss"
OUTCOMES_FIGURE = "outcomes"
SECTION_FIGURES = (SERVER_QUEUE_FIGURE, PACKET_LOSS_FIGURE, OUTCOMES_FIGURE)


def build_view(summary: Summary, figures: Sequence[FigureData] = ()) -> ReportView:
    """The view of a summary (redacted here) and of the figures drawn from its run."""
    s = redacted(summary)
    metrics = _key_metrics(s)
    shown = tuple(figure(*f) for f in figures)
    return ReportView(
        headline=_headline(s),
        invalid_reasons=None if s.validity.ok else tuple(s.validity.reasons),
        stops=stop_lines(s.stop),
        cut_at_end=cut_at_end_text(s.cut_at_end),
        resent=resent_text(s.resent),
        slos=tuple(_slo_row(slo) for slo in s.slos),
        metrics=tuple(row for name, entry in metrics for row in _metric_rows(s, name, entry)),
        unavailable=tuple(
            Fact(name, entry.unavailable)
            for name, entry in metrics
            if entry.unavailable is not None and not _metric_rows(s, name, entry)
        ),
        ratios=_ratio_rows(s),
        status=_status_rows(s),
        status_by_stage=_status_by_stage(s),
        migration=_migration(s.migration),
        head_of_line=_head_of_line(s.head_of_line),
        refusals=_refusals(s),
        facts=_facts(s),
        stages=_stage_rows(s),
        environment=_flatten("", s.environment),
        telemetry=tuple(Fact(k, f"{float(v):.4g}") for k, v in s.telemetry.items()),
        server_queue=_server_queue(s.server_queue, _named(shown, SERVER_QUEUE_FIGURE)),
        prefix_cache=(
            ()
            if s.prefix_cache is None
            else tuple(Fact(label, text) for label, text in prefix_cache_rows(s.prefix_cache))
        ),
        sessions=sessions_view(s.sessions),
        outcomes=outcomes_view(
            s.outcomes, lambda key: _stage_label(s, key), _named(shown, OUTCOMES_FIGURE)
        ),
        packet_loss=_packet_loss(s, _named(shown, PACKET_LOSS_FIGURE)),
        profile=s.profile,
        workers=_workers(s.distributed),
        figures=tuple(f for f in shown if f.name not in SECTION_FIGURES),
    )


def _named(figures: Sequence[Figure], name: str) -> Figure | None:
    return next((f for f in figures if f.name == name), None)


def figure(name: str, title: str, caption: str, png: bytes) -> Figure:
    """A figure with its PNG inlined as a data: URI."""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return Figure(name=name, title=title, caption=caption, src=src)


# Formatting: the one place each kind of number gets its digits and its "no value".


def _number(value: JsonFloat) -> float | None:
    """A summary.json number: null -> None, "inf" (JSON has no infinity) -> inf."""
    return None if value is None else float(value)


def ms(value: JsonFloat) -> str:
    """Seconds as milliseconds with 4 significant digits, "∞" for "inf", NO_VALUE for null:
    every report's milliseconds (sweep.md's too)."""
    v = _number(value)
    if v is None:
        return NO_VALUE
    return "∞" if math.isinf(v) else significant(v * 1e3)


def _plain(value: object) -> str:
    """A value as the summary holds it (a name, a configured rate), or NO_VALUE for null."""
    return NO_VALUE if value is None else str(value)


def _count(value: int) -> str:
    return f"{value:,}"


def _share(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.2%}"


def _ratio(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.3g}"


def _req_rate(value: float | None, digits: str = ".4g") -> str:
    return NO_VALUE if value is None else f"{value:{digits}} req/s"


def _one_decimal(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


# Sections: each reads its own part of the summary.


def _headline(s: Summary) -> Headline:
    requests = s.requests
    return Headline(
        verdict=s.verdict,
        badge=VERDICT_BADGE[s.verdict],
        scenario=s.scenario.name,
        target=s.target,
        api=s.api,
        started_at=s.started_at,
        sent=_count(requests.sent),
        ok=_count(requests.ok),
        failed=_count(requests.failed),
        duration_s=f"{s.duration:.1f}",
        ok_rate=_one_decimal(s.throughput.requests_per_s),
        goodput=_one_decimal(s.throughput.goodput_per_s),
        resolution=None if s.target_resolution is None else s.target_resolution.describe(),
    )


def _slo_unit(slo: model.SloRecord) -> str:
    """The unit an SLO's values are shown in; '' when its expression no longer parses."""
    if slo.metric == "errors" or slo.metric.startswith("status_"):
        return "%"
    try:
        return parse_slo(slo.expr).unit
    except UsageError:
        return ""


def _slo_row(slo: model.SloRecord) -> SloRow:
    unit = _slo_unit(slo)
    low, high = _number(slo.ci_low), _number(slo.ci_high)
    if low is None and high is None:
        ci = NO_VALUE
    else:
        lo = "−∞" if low is None else format_value(low, unit)
        hi = "+∞" if high is None else format_value(high, unit)
        ci = f"[{lo}, {hi}]"
    return SloRow(
        expr=slo.expr,
        verdict=slo.verdict,
        badge=VERDICT_BADGE[slo.verdict],
        value=format_value(_number(slo.value), unit),
        threshold=format_value(slo.threshold, unit),
        ci=ci,
        message=slo.message,
    )


def _key_metrics(s: Summary) -> list[tuple[str, model.MetricStats]]:
    """The key metrics the run has, in KEY_METRICS order."""
    return [(name, s.metrics[name]) for name in KEY_METRICS if name in s.metrics]


def _stage_label(s: Summary, key: str) -> str:
    """A stage of a by-stage map (keyed by its index as a string), with its name if known."""
    names = {str(stage.index): stage.name for stage in s.stages}
    return f"stage {key} ({names[key]})" if key in names else f"stage {key}"


def _metric_rows(s: Summary, name: str, entry: model.MetricStats) -> list[MetricRow]:
    """The metric over all requests, then per stage and per class when there are several.
    Without timing headers, server_queue is the server's metrics' figure when they have one."""
    if entry.unavailable is not None:
        return _server_queue_rows(s) if name == "server_queue" else []

    def row(group: str, stats: model.Stats) -> MetricRow:
        ci = stats.ci
        return MetricRow(
            metric=name,
            group=group,
            n=_count(stats.n),
            p50=ms(stats.p50),
            p90=ms(stats.p90),
            p99=ms(stats.p99),
            p999=ms(stats.p999),
            maximum=ms(stats.max),
            p50_ci="" if ci is None else _ms_interval(ci.p50),
            p99_ci="" if ci is None else _ms_interval(ci.p99),
        )

    rows = [row("all", entry)]
    if len(entry.by_stage) > 1:
        rows += [row(_stage_label(s, k), v) for k, v in entry.by_stage.items()]
    if len(entry.by_class) > 1:
        rows += [row(f"class {k}", v) for k, v in entry.by_class.items()]
    return rows


def _server_queue_rows(s: Summary) -> list[MetricRow]:
    """server_queue from the server's queue-time histogram, when it counted requests."""
    q = s.server_queue
    if not isinstance(q, model.ServerQueue) or not isinstance(q.queue_time, model.QueueTime):
        return []
    t = q.queue_time
    if t.count == 0:
        return []
    return [
        MetricRow(
            metric="server_queue",
            group="from the server's metrics",
            n=_count(t.count),
            p50=_at_most(t.p50, t.largest_bound),
            p90=_at_most(t.p90, t.largest_bound),
            p99=_at_most(t.p99, t.largest_bound),
            p999=NO_VALUE,
            maximum=NO_VALUE,
            p50_ci="",
            p99_ci="",
        )
    ]


def _queue_metrics(q: model.ServerQueue) -> tuple[str, ...]:
    parts = (q.waiting, q.running, q.queue_time)
    return tuple(p.metric for p in parts if not isinstance(p, model.Unavailable))


def queue_source(q: model.ServerQueue) -> str:
    """Where the figures come from: "from vLLM's /metrics (vllm:num_requests_waiting, ...)"."""
    return f"from {q.engine_name}'s /metrics ({', '.join(_queue_metrics(q))})"


def _gauge_text(g: model.GaugeSummary | model.Unavailable) -> str:
    if isinstance(g, model.Unavailable):
        return f"unavailable: {g.unavailable}"
    return f"max {g.max:g}, mean {g.mean:.3g}"


def _at_most(bound: JsonFloat, largest: float | None) -> str:
    """A histogram percentile, the upper bound of its bucket: "≤ 300", or "> 120000" past
    the largest finite bound (ms)."""
    v = _number(bound)
    if v is None:
        return NO_VALUE
    if math.isinf(v):
        return NO_VALUE if largest is None else f"> {ms(largest)}"
    return f"≤ {ms(v)}"


def _queue_time_text(t: model.QueueTime | model.Unavailable) -> str:
    """Percentiles (bucket bounds) and the exact mean in ms, and how many requests the
    histogram counted."""
    if isinstance(t, model.Unavailable):
        return f"unavailable: {t.unavailable}"
    p50, p90, p99 = (_at_most(v, t.largest_bound) for v in (t.p50, t.p90, t.p99))
    return (
        f"p50 {p50} ms, p90 {p90} ms, p99 {p99} ms (bucket bounds), mean {ms(t.mean)} ms"
        f" ({_count(t.count)} requests)"
    )


def server_queue_lines(q: model.ServerQueue) -> list[Fact]:
    """The section's rows, as the terminal shows them too."""
    return [
        Fact("requests waiting", _gauge_text(q.waiting)),
        Fact("requests running", _gauge_text(q.running)),
        Fact("queue time", _queue_time_text(q.queue_time)),
    ]


def _server_queue(
    q: model.ServerQueue | model.Unavailable | None, plot: Figure | None
) -> ServerQueue | None:
    if q is None:
        return None
    if isinstance(q, model.Unavailable):
        return ServerQueue("", (), "", (), q.unavailable, None)
    return ServerQueue(
        engine=q.engine_name,
        metrics=_queue_metrics(q),
        url=q.url,
        rows=tuple(server_queue_lines(q)),
        unavailable=None,
        figure=plot,
    )


def _seconds(value: float) -> str:
    """A time in seconds, 3 significant digits: "0.0005 s", "1.5 s", "12.3 s"."""
    return f"{significant(value, 3)} s"


def _times(value: float | None) -> str:
    return NO_VALUE if value is None else f"{value:.3g}×"


def _loss_windows(p: model.PacketLoss) -> str:
    """When the drop rules were in place, seconds since the start: "5.003–10.004 s"."""
    if not p.windows:
        return "never applied (see the run's notes)"
    spans = [
        f"{w.applied_s:.3f}–{w.removed_s:.3f} s"
        if w.removed_s is not None
        else f"from {w.applied_s:.3f} s, never removed"
        for w in p.windows
    ]
    return ", ".join(spans)


def _loss_stages(s: Summary, p: model.PacketLoss) -> str:
    return ", ".join(_stage_label(s, str(i)) for i in p.impaired_stages)


def _loss_p99(p: model.PacketLoss) -> str:
    """ "912 ms under loss against 70 ms baseline (13×, +842 ms)"."""
    if p.loss_p99_s is None or p.baseline_p99_s is None:
        return (
            f"{ms(p.loss_p99_s)} ms under loss; baseline {ms(p.baseline_p99_s)} ms"
            " (no ratio without both)"
        )
    delta = p.p99_delta_s if p.p99_delta_s is not None else p.loss_p99_s - p.baseline_p99_s
    sign = "+" if delta >= 0 else "−"
    return (
        f"{ms(p.loss_p99_s)} ms under loss against {ms(p.baseline_p99_s)} ms baseline"
        f" ({_times(p.p99_ratio)}, {sign}{ms(abs(delta))} ms)"
    )


def loss_recovery(p: model.PacketLoss, *, brief: bool = False) -> str:
    """The recovery time after the loss, or that there was none within the run; `brief`
    leaves out the rule it was judged by (the terminal's line)."""
    r = p.recovery
    window = f"the P99 of the next {r.window_s:g} s of requests"
    within = f"within {r.tolerance:.0%} of the baseline P99"
    if r.recovered and r.recovery_s is not None:
        text = (
            f"recovered {_seconds(r.recovery_s)} after the loss ended at {r.after_s:.2f} s"
            f" (t = {r.after_s + r.recovery_s:.2f} s)"
        )
        return text if brief else f"{text}: from there {window} is {within}"
    if p.baseline_p99_s is None:
        return "recovery unknown: no baseline stage before the loss to compare with"
    text = "did not recover within the run"
    return text if brief else f"{text} (at no time after the loss was {window} {within})"


def packet_loss_lines(s: Summary, p: model.PacketLoss) -> list[Fact]:
    """The section's rows, as the terminal shows them too."""
    return [
        Fact("loss", f"{p.loss * 100:g}% of packets, each direction, in {_loss_stages(s, p)}"),
        Fact("rules in place", _loss_windows(p)),
        Fact("dropped packets", _count(p.dropped_packets)),
        Fact("latency P99", _loss_p99(p)),
        Fact("error share under loss", _share(p.loss_error_share)),
        Fact("recovery", loss_recovery(p)),
    ]


def _packet_loss(s: Summary, plot: Figure | None) -> PacketLoss | None:
    p = s.packet_loss
    if p is None:
        return None
    stages = tuple(
        LossStageRow(
            stage=_stage_label(s, str(row.stage)),
            impaired=row.impaired,
            requests=_count(row.requests),
            errors=_count(row.errors),
            error_share=_share(row.error_share),
            p99=ms(row.p99_s),
            ratio=_times(row.p99_ratio),
        )
        for row in p.stages
    )
    return PacketLoss(rows=tuple(packet_loss_lines(s, p)), stages=stages, figure=plot)


def _clock_time(ns: int) -> str:
    """A clock offset or its uncertainty: µs below 1 ms, ms below 1 s, else s (the monotonic
    clocks of two machines differ by about their uptimes)."""
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.6f} s"


def _clock(w: model.DistributedWorker) -> str:
    if w.clock_offset_ns is None:
        return NO_VALUE  # it never measured it (lost before the load)
    sign = "+" if w.clock_offset_ns >= 0 else "-"
    offset = sign + _clock_time(abs(w.clock_offset_ns))
    if w.clock_uncertainty_ns is None:
        return offset
    return f"{offset} ± {_clock_time(w.clock_uncertainty_ns)}"


def _worker_row(w: model.DistributedWorker) -> WorkerRow:
    return WorkerRow(
        worker=f"{w.index} ({w.host})",
        sent=NO_VALUE if w.requests_sent is None else _count(w.requests_sent),
        recorded=_count(w.samples_received),
        clock=_clock(w),
        lag_p99=ms(w.schedule_lag_p99_s),
        state=w.state,
        missing=w.missing or "",
    )


def _workers(d: model.Distributed | None) -> Workers | None:
    if d is None:
        return None
    lost = "none"
    if d.lost_requests or d.lost_share:
        lost = (
            f"{_count(d.lost_requests)} requests ({_share(d.lost_share)} of the run;"
            f" allowed {_share(d.max_lost_share)})"
        )
    return Workers(master=d.master, lost=lost, rows=tuple(_worker_row(w) for w in d.workers))


def _ms_interval(bounds: tuple[JsonFloat, JsonFloat]) -> str:
    return f"[{ms(bounds[0])}, {ms(bounds[1])}]"


def _ratio_rows(s: Summary) -> tuple[RatioRow, ...]:
    """The ratios that have a finite value ("inf" and null have no row)."""
    return tuple(
        RatioRow(name, f"{ratio.p99_p50:.3g}", str(ratio.worst_class))
        for name, ratio in s.ratios.items()
        if isinstance(ratio.p99_p50, float)
    )


def _status_rows(s: Summary) -> tuple[StatusRow, ...]:
    total = max(1, s.requests.sent)
    return tuple(StatusRow(key, _count(n), f"{n / total:.2%}") for key, n in s.status_codes.items())


def _status_by_stage(s: Summary) -> StageStatus | None:
    by_stage = s.status_mix.by_stage
    if len(by_stage) < 2:
        return None
    keys = tuple(s.status_codes)
    rows = tuple(
        StageStatusRow(
            stage=_stage_label(s, stage),
            n=_count(sum(entry.counts.values())),
            shares=tuple(_share(entry.share.get(k, 0.0)) for k in keys),
        )
        for stage, entry in by_stage.items()
    )
    return StageStatus(statuses=keys, rows=rows)


def _migration(entry: model.Migration | model.Unavailable) -> Migration | None:
    if not isinstance(entry, model.Migration):
        return None
    base, over = entry.baseline, entry.overload
    rows = [
        _measure("requests", _count, base.sent, over.sent),
        *(MigrationRow(r.status, _share(r.baseline), _share(r.overload), True) for r in entry.rows),
        _measure("latency p50 (ms)", ms, base.latency_p50, over.latency_p50),
        _measure("latency p99 (ms)", ms, base.latency_p99, over.latency_p99),
        _measure("latency p99/p50", _ratio, base.latency_p99_p50, over.latency_p99_p50),
        _measure("time_to_reject p99 (ms)", ms, base.time_to_reject_p99, over.time_to_reject_p99),
    ]
    return Migration(
        baseline=_migration_side(base), overload=_migration_side(over), rows=tuple(rows)
    )


def _migration_side(side: model.MigrationStage) -> str:
    return f"stage {side.stage} ({side.name}, {_req_rate(side.send_rate, '.1f')})"


def _measure(text: str, fmt: Callable[[_T], str], baseline: _T, overload: _T) -> MigrationRow:
    """A measure of the baseline and the overload stage, in one format."""
    return MigrationRow(text, fmt(baseline), fmt(overload), is_status=False)


def _head_of_line(entry: model.HeadOfLine | model.Unavailable) -> HeadOfLine | None:
    if not isinstance(entry, model.HeadOfLine):
        return None
    rows = tuple(
        HeadOfLineRow(
            request_class=cls,
            metric=metric,
            baseline_p50=ms(row.baseline_p50),
            mixed_p50=ms(row.mixed_p50),
            ratio_p50=_ratio(row.ratio_p50),
            baseline_p99=ms(row.baseline_p99),
            mixed_p99=ms(row.mixed_p99),
            ratio_p99=_ratio(row.ratio_p99),
        )
        for cls, by_metric in entry.by_class.items()
        for metric, row in (("latency", by_metric.latency), ("ttft", by_metric.ttft))
    )
    return HeadOfLine(str(entry.mixed_stage), str(entry.baseline_stage), rows)


def sessions_view(entry: model.Sessions | None) -> SessionsView | None:
    if entry is None:
        return None
    facts = (
        Fact(
            "sessions",
            f"{entry.sessions} started, {entry.completed} with all {entry.turns} turns answered",
        ),
        Fact(
            "session time (completed)",
            f"p50 {ms(entry.session_time_p50)} ms, p99 {ms(entry.session_time_p99)} ms, "
            f"mean {ms(entry.session_time_mean)} ms",
        ),
    )
    rows = tuple(
        TurnRow(
            turn=str(t.turn),
            requests=str(t.requests),
            ok=str(t.ok),
            ttft_p50=ms(t.ttft_p50),
            ttft_p99=ms(t.ttft_p99),
            latency_p50=ms(t.latency_p50),
            latency_p99=ms(t.latency_p99),
            prompt_tokens=NO_VALUE
            if t.prompt_tokens_mean is None
            else f"{t.prompt_tokens_mean:.0f}",
        )
        for t in entry.by_turn
    )
    return SessionsView(facts, rows)


def _refusals(s: Summary) -> Refusals | None:
    entry = s.retry_after
    if not isinstance(entry, model.RetryAfter):
        return None
    reject = s.metrics.get("time_to_reject", model.MetricStats(n=0))
    return Refusals(
        refused=_count(entry.refusals),
        reject_p50=ms(reject.p50),
        reject_p99=ms(reject.p99),
        retry_after=_share(entry.share),
        follow_up=follow_up_text(s.retry_after_follow_up),
    )


def follow_up_text(f: model.RetryAfterFollowUp | None) -> str | None:
    """The Retry-After follow-ups in one sentence, their extra traffic declared."""
    if f is None:
        return None
    if not f.followed:
        return (
            f"Retry-After follow-ups: none (up to {f.asked} asked; no refusal carried a "
            "Retry-After to follow)"
        )
    later = ""
    if f.to_admission:
        low, high = significant(f.to_admission[0]), significant(f.to_admission[-1])
        later = f" (after {low} s)" if low == high else f" (after {low} to {high} s)"
    late = "" if f.send_late_p99 is None else f", sent {ms(f.send_late_p99)} ms late at p99"
    honoured = _share(f.honoured_share)
    return (
        f"Retry-After honoured: {f.honoured} of {f.tried} followed refusals ({honoured}) were "
        f"admitted when their Retry-After said, {f.admitted_later} later{later}, "
        f"{f.refused_throughout} refused at every try, {f.failed} failed, "
        f"{f.ended_with_run} cut by the run's end; {f.extra_requests} extra requests "
        f"(up to {f.attempts} tries each{late}), kept out of every other figure "
        "(retry_after.parquet)"
    )


_LOOP = {"open": "open (arrival rate)", "closed": "closed (virtual users)"}


def _facts(s: Summary) -> tuple[Fact, ...]:
    """The run table of report.html: what was offered, what was achieved, clock offset."""
    load, throughput, clock = s.load, s.throughput, s.clock
    achieved = load.achieved_ratio
    rows = [
        ("scenario", s.scenario.name),
        ("description", s.scenario.config.get("description", "")),
        ("target", s.target),
        ("api", s.api),
        ("started", s.started_at),
        ("duration", f"{s.duration:.2f} s"),
        ("loop", _LOOP[load.loop]),
        (
            "offered",
            f"{load.offered_requests or NO_VALUE} requests, {_req_rate(load.offered_rate)}",
        ),
        (
            "achieved",
            f"{_req_rate(load.achieved_rate)}"
            f" ({NO_VALUE if achieved is None else f'{achieved:.1%}'} of offered)",
        ),
        ("ok throughput", _req_rate(throughput.requests_per_s)),
        ("goodput", _req_rate(throughput.goodput_per_s)),
        (
            "server clock offset",
            f"{clock.server_offset_ns} ns ({clock.server_offset_source})",
        ),
    ]
    return tuple(Fact(label, str(value)) for label, value in rows)


def prefix_cache_rows(pc: model.PrefixCache) -> list[tuple[str, str]]:
    """The prefix cache in two lines: the server's counters, the responses' usage."""
    server = _or_reason(pc.server, _cache_counters_text)
    return [("server's counters", server), ("responses' usage", _or_reason(pc.usage, _usage_text))]


def _or_reason(value: Any, text: Callable[[Any], str]) -> str:
    """`text(value)`, or why there is no value."""
    if isinstance(value, model.Unavailable):
        return f"{NO_VALUE} ({value.unavailable})"
    return text(value)


def _cache_counters_text(c: model.CacheCounters | model.CacheHitRate) -> str:
    if isinstance(c, model.CacheHitRate):
        return (
            f"hit rate {c.mean:.1%} on average, {c.max:.1%} at most, over {c.scrapes} scrapes "
            f"of {c.metric} (the server's recent rate, not counters)"
        )
    rate = NO_VALUE if c.hit_rate is None else f"{c.hit_rate:.1%}"
    names = ", ".join(c.metrics)
    return f"hit rate {rate}: {c.hits:.0f} of {c.queries:.0f} prompt tokens ({names})"


def _usage_text(u: model.CachedUsage) -> str:
    share = NO_VALUE if u.cached_share is None else f"{u.cached_share:.1%}"
    return (
        f"{share} of prompt tokens cached in {u.reporting} of {u.requests} responses "
        f"({u.cached_requests} with a hit); TTFT p50 {_seconds_or_none(u.ttft_p50_cached)} "
        f"with a hit, {_seconds_or_none(u.ttft_p50_uncached)} without"
    )


def _seconds_or_none(value: float | str | None) -> str:
    return NO_VALUE if value is None else f"{float(value) * 1e3:.3g} ms"


def _stage_rows(s: Summary) -> tuple[StageRow, ...]:
    return tuple(
        StageRow(
            index=str(stage.index),
            name=stage.name,
            start_s=f"{stage.start:.2f}",
            end_s=f"{stage.end:.2f}",
            target_rate=_plain(stage.target_rate),
        )
        for stage in s.stages
    )


def _flatten(prefix: str, value: object) -> tuple[Fact, ...]:
    """Nested mappings as dotted labels: {"a": {"b": 1}} -> a.b = 1."""
    if isinstance(value, Mapping):
        return tuple(
            fact
            for k, v in value.items()
            for fact in _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        )
    return (Fact(prefix, _plain(value)),)
