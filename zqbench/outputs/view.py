"""The view model of a saved run: what report.html and summary.md show, formatted once.

    view = build_view(summary, figures)   # -> ReportView

A renderer of the saved summary: it computes nothing new. Every string from the run is
redacted first. The templates (outputs/templates/) lay out the redacted summary itself
(`view.summary`), its numbers through the filters of zqbench.metrics.sections.text and
FILTERS below; this module builds only what needs more than a filter (the SLO rows in their
unit, the key metrics by group, the run facts) and asks each optional section
(zqbench.metrics.sections) for its partials' data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zqbench import summary as model
from zqbench.errors import UsageError
from zqbench.metrics.classify import IN_DISGUISE
from zqbench.metrics.sections import SECTIONS, text
from zqbench.metrics.sections.base import Place
from zqbench.metrics.sections.server_queue import at_most as _at_most
from zqbench.metrics.sections.text import NO_VALUE, Fact, Figure, figure, ms
from zqbench.metrics.sig_digits import significant
from zqbench.metrics.slo import format_value, parse_slo
from zqbench.outputs.json_out import redacted
from zqbench.summary import JsonFloat, Summary

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
    "connection_wait",
    "server_queue",
    "dispatch_delay",
    "dispatch_jitter",
)
# A figure as outputs/plots.py hands it over: (name, title, caption, PNG bytes).
FigureData = tuple[str, str, str, bytes]


@dataclass(frozen=True)
class MetricRow:
    """Percentiles (ms) of one metric over one group: all requests, a stage or a class."""

    metric: str
    group: str  # "all", "stage 1 (burst)", "class short"
    n: str
    p50: str
    p90: str
    p99: str
    p999: str = NO_VALUE
    maximum: str = NO_VALUE
    p50_ci: str = ""  # "[lo, hi]" in ms, or "" when the summary has no CI
    p99_ci: str = ""


@dataclass(frozen=True)
class SectionView:
    """An optional section the run has: its partials (templates/sections/<name>.*.j2) lay
    out `data`, what its module (zqbench.metrics.sections) made of the summary."""

    name: str
    place: Place
    data: Any


@dataclass(frozen=True)
class ReportView:
    """Every part of report.html and summary.md; empty or None when the run lacks it."""

    summary: Summary  # redacted: what the pages lay out from the model itself, with filters
    metrics: tuple[MetricRow, ...]
    unavailable: tuple[Fact, ...]  # metric: why it has no value (never shown as zero)
    facts: tuple[Fact, ...]
    environment: tuple[Fact, ...]
    telemetry: tuple[Fact, ...]
    sections: tuple[SectionView, ...]  # the optional ones the run has, in SECTIONS order
    figures: tuple[Figure, ...]  # all but those the sections hold


def build_view(summary: Summary, figures: Sequence[FigureData] = ()) -> ReportView:
    """The view of a summary (redacted here) and of the figures drawn from its run."""
    s = redacted(summary)
    metrics = [(name, s.metrics[name]) for name in KEY_METRICS if name in s.metrics]
    shown = tuple(figure(*f) for f in figures)
    return ReportView(
        summary=s,
        metrics=tuple(row for name, entry in metrics for row in _metric_rows(s, name, entry)),
        unavailable=tuple(
            Fact(name, entry.unavailable)
            for name, entry in metrics
            if entry.unavailable is not None and not _metric_rows(s, name, entry)
        ),
        facts=_facts(s),
        environment=_flatten("", s.environment),
        telemetry=tuple(Fact(k, f"{float(v):.4g}") for k, v in s.telemetry.items()),
        sections=_sections(s, shown),
        figures=tuple(f for f in shown if f.name not in {x.figure for x in SECTIONS}),
    )


def _sections(s: Summary, figures: Sequence[Figure]) -> tuple[SectionView, ...]:
    """Each section the run has, given its own figure (None when it has none or none was
    drawn)."""
    views = []
    for section in SECTIONS:
        plot = next((f for f in figures if f.name == section.figure), None)
        data = section.data(s, plot)
        if data is not None:
            views.append(SectionView(section.name, section.place, data))
    return tuple(views)


def _req_rate(value: float | None, digits: str = ".4g") -> str:
    return NO_VALUE if value is None else f"{value:{digits}} req/s"


# The SLO table's cells (filters), each in the unit its SLO was written in.


def _slo_unit(slo: model.SloRecord) -> str:
    """The unit an SLO's values are shown in; '' when its expression no longer parses."""
    if slo.metric == "errors" or slo.metric.startswith("status_"):
        return "%"
    try:
        return parse_slo(slo.expr).unit
    except UsageError:
        return ""


def slo_value(slo: model.SloRecord) -> str:
    """The SLO's measured value, in the unit it was written in."""
    return format_value(text.number(slo.value), _slo_unit(slo))


def slo_threshold(slo: model.SloRecord) -> str:
    return format_value(slo.threshold, _slo_unit(slo))


def slo_ci(slo: model.SloRecord) -> str:
    """The value's 95% CI in the SLO's unit; an unbounded side is −∞ or +∞."""
    unit = _slo_unit(slo)
    low, high = text.number(slo.ci_low), text.number(slo.ci_high)
    if low is None and high is None:
        return NO_VALUE
    lo = "−∞" if low is None else format_value(low, unit)
    hi = "+∞" if high is None else format_value(high, unit)
    return f"[{lo}, {hi}]"


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
            n=text.count(stats.n),
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
        rows += [row(text.stage_label(s, k), v) for k, v in entry.by_stage.items()]
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
    p50, p90, p99 = (_at_most(v, t.largest_bound) for v in (t.p50, t.p90, t.p99))
    return [
        MetricRow("server_queue", "from the server's metrics", text.count(t.count), p50, p90, p99)
    ]


def _ms_interval(bounds: tuple[JsonFloat, JsonFloat]) -> str:
    return f"[{ms(bounds[0])}, {ms(bounds[1])}]"


def migration_side(side: model.MigrationStage) -> str:
    """A stage of the migration table's head: "stage 0 (baseline, 2.5 req/s)"."""
    return f"stage {side.stage} ({side.name}, {_req_rate(side.send_rate, '.1f')})"


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
    honoured = text.share(f.honoured_share)
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
    offered = f"{load.offered_requests or NO_VALUE} requests, {_req_rate(load.offered_rate)}"
    share = NO_VALUE if load.achieved_ratio is None else f"{load.achieved_ratio:.1%}"
    rows = [
        ("scenario", s.scenario.name),
        ("description", s.scenario.config.get("description", "")),
        ("target", s.target),
        ("api", s.api),
        ("started", s.started_at),
        ("duration", f"{s.duration:.2f} s"),
        ("loop", _LOOP[load.loop]),
        ("offered", offered),
        ("achieved", f"{_req_rate(load.achieved_rate)} ({share} of offered)"),
        ("ok throughput", _req_rate(throughput.requests_per_s)),
        ("goodput", _req_rate(throughput.goodput_per_s)),
        ("server clock offset", f"{clock.server_offset_ns} ns ({clock.server_offset_source})"),
    ]
    return tuple(Fact(label, str(value)) for label, value in rows)


def _flatten(prefix: str, value: object) -> tuple[Fact, ...]:
    """Nested mappings as dotted labels: {"a": {"b": 1}} -> a.b = 1."""
    if isinstance(value, Mapping):
        return tuple(
            fact
            for k, v in value.items()
            for fact in _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        )
    return (Fact(prefix, text.plain(value)),)


def status_note(key: str) -> str:
    """What a status-mix key means where its name alone would mislead: a 2xx that was a
    refusal in disguise (`200:refused_in_stream`); "" for any other key."""
    return f" ({IN_DISGUISE})" if key.endswith(":refused_in_stream") else ""


# The page's own filters (outputs/templating.py gives both environments these, besides
# zqbench.metrics.sections.text.FILTERS and every section's).
FILTERS = {
    "status_note": status_note,
    "migration_side": migration_side,
    "follow_up": follow_up_text,
    "slo_value": slo_value,
    "slo_threshold": slo_threshold,
    "slo_ci": slo_ci,
}
