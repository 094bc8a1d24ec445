"""The view model of a saved run: what report.html and summary.md show, formatted once.

    view = build_view(summary, figures)   # -> ReportView: frozen dataclasses of strings

A renderer of the saved summary: it computes nothing new. Every string from the run is
redacted first; every number is formatted here, once for both templates: durations in ms
with 4 significant digits, "–" for no value (never 0), "∞" for a percentile that lands on
a failure (the error-adjusted latency). The templates (outputs/templates/) only lay the
view out. This module is the only reader of the summary's keys for those two outputs.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zqbench.errors import UsageError
from zqbench.metrics.slo import format_value, parse_slo
from zqbench.redact import redact

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


@dataclass(frozen=True)
class Fact:
    """One labelled value of the run (run facts, environment, telemetry)."""

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
class Unavailable:
    """A metric with no value, and why (never shown as zero)."""

    metric: str
    reason: str


@dataclass(frozen=True)
class RatioRow:
    """The p99/p50 ratio of a metric in its worst request class."""

    metric: str
    p99_p50: str
    worst_class: str


@dataclass(frozen=True)
class StatusRow:
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
    statuses: tuple[str, ...]
    rows: tuple[StageStatusRow, ...]


@dataclass(frozen=True)
class MigrationRow:
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
    mixed_stage: str
    baseline_stage: str
    rows: tuple[HeadOfLineRow, ...]


@dataclass(frozen=True)
class Refusals:
    """Requests refused with 429/503/529: how fast, and how many carried Retry-After."""

    refused: str
    reject_p50: str  # ms
    reject_p99: str  # ms
    retry_after: str  # share of the refusals


@dataclass(frozen=True)
class StageRow:
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
class ReportView:
    """Every section of report.html and summary.md; empty or None when the run lacks it."""

    headline: Headline
    invalid_reasons: tuple[str, ...] | None  # None for a valid run
    slos: tuple[SloRow, ...]
    metrics: tuple[MetricRow, ...]
    unavailable: tuple[Unavailable, ...]
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
    figures: tuple[Figure, ...]


def build_view(summary: Mapping[str, Any], figures: Sequence[FigureData] = ()) -> ReportView:
    """The view of a summary dict (redacted here) and of the figures drawn from its run."""
    s = redact(dict(summary))
    validity = s["validity"]
    return ReportView(
        headline=_headline(s),
        invalid_reasons=None if validity["ok"] else tuple(validity["reasons"]),
        slos=tuple(_slo_row(slo) for slo in s["slos"]),
        metrics=tuple(
            row for name, entry in _key_metrics(s) for row in _metric_rows(s, name, entry)
        ),
        unavailable=tuple(
            Unavailable(name, entry["unavailable"])
            for name, entry in _key_metrics(s, unavailable=True)
        ),
        ratios=_ratio_rows(s),
        status=_status_rows(s),
        status_by_stage=_status_by_stage(s),
        migration=_migration(s.get("migration") or {}),
        head_of_line=_head_of_line(s.get("head_of_line") or {}),
        refusals=_refusals(s),
        facts=_facts(s),
        stages=_stage_rows(s),
        environment=_flatten("", s.get("environment", {})),
        telemetry=tuple(Fact(k, f"{float(v):.4g}") for k, v in s.get("telemetry", {}).items()),
        figures=tuple(figure(*f) for f in figures),
    )


def figure(name: str, title: str, caption: str, png: bytes) -> Figure:
    """A figure with its PNG inlined as a data: URI."""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return Figure(name=name, title=title, caption=caption, src=src)


# Formatting: the one place each kind of number gets its digits and its "no value".


def _number(value: Any) -> float | None:
    """A summary.json number: null -> None, "inf" (JSON has no infinity) -> inf."""
    return None if value is None else float(value)


def _ms(value: Any) -> str:
    """Seconds as milliseconds with 4 significant digits."""
    v = _number(value)
    if v is None:
        return NO_VALUE
    return "∞" if math.isinf(v) else f"{v * 1e3:.4g}"


def _plain(value: Any) -> str:
    """A value as the summary holds it (a name, a configured rate), or NO_VALUE for null."""
    return NO_VALUE if value is None else str(value)


def _count(value: Any) -> str:
    return f"{value:,}"


def _share(value: Any) -> str:
    return NO_VALUE if value is None else f"{float(value):.2%}"


def _ratio(value: Any) -> str:
    return NO_VALUE if value is None else f"{float(value):.3g}"


def _req_rate(value: Any, digits: str = ".4g") -> str:
    return NO_VALUE if value is None else f"{float(value):{digits}} req/s"


# Sections: each reads its own part of the summary.


def _headline(s: Mapping[str, Any]) -> Headline:
    verdict = str(s["verdict"])
    requests = s["requests"]
    throughput = s.get("throughput", {})
    rate, goodput = throughput.get("requests_per_s"), throughput.get("goodput_per_s")
    return Headline(
        verdict=verdict,
        badge=VERDICT_BADGE.get(verdict, verdict),
        scenario=s["scenario"]["name"],
        target=s["target"],
        api=s["api"],
        started_at=s["started_at"],
        sent=_count(requests["sent"]),
        ok=_count(requests["ok"]),
        failed=_count(requests["failed"]),
        duration_s=f"{float(s['duration']):.1f}",
        ok_rate=None if rate is None else f"{rate:.1f}",
        goodput=None if goodput is None else f"{goodput:.1f}",
    )


def _slo_unit(slo: Mapping[str, Any]) -> str:
    """The unit an SLO's values are shown in; '' when its expression no longer parses."""
    if slo["metric"] == "errors" or str(slo["metric"]).startswith("status_"):
        return "%"
    try:
        return parse_slo(slo["expr"]).unit
    except UsageError:
        return ""


def _slo_row(slo: Mapping[str, Any]) -> SloRow:
    unit = _slo_unit(slo)
    low, high = _number(slo.get("ci_low")), _number(slo.get("ci_high"))
    if low is None and high is None:
        ci = NO_VALUE
    else:
        lo = "−∞" if low is None else format_value(low, unit)
        hi = "+∞" if high is None else format_value(high, unit)
        ci = f"[{lo}, {hi}]"
    verdict = str(slo["verdict"])
    return SloRow(
        expr=slo["expr"],
        verdict=verdict,
        badge=VERDICT_BADGE.get(verdict, verdict),
        value=format_value(_number(slo["value"]), unit),
        threshold=format_value(_number(slo["threshold"]), unit),
        ci=ci,
        message=slo["message"],
    )


def _key_metrics(
    s: Mapping[str, Any], *, unavailable: bool = False
) -> list[tuple[str, Mapping[str, Any]]]:
    """The key metrics the run has, in KEY_METRICS order: with values, or the unavailable."""
    entries = [(name, s["metrics"].get(name)) for name in KEY_METRICS]
    return [(n, e) for n, e in entries if e is not None and ("unavailable" in e) == unavailable]


def _stage_label(s: Mapping[str, Any], key: str) -> str:
    names = {str(stage["index"]): stage["name"] for stage in s.get("stages", [])}
    return f"stage {key} ({names[key]})" if key in names else f"stage {key}"


def _metric_rows(s: Mapping[str, Any], name: str, entry: Mapping[str, Any]) -> list[MetricRow]:
    """The metric over all requests, then per stage and per class when there are several."""

    def row(group: str, stats: Mapping[str, Any]) -> MetricRow:
        ci = stats.get("ci", {})

        def bounds(p: str) -> str:
            return f"[{_ms(ci[p][0])}, {_ms(ci[p][1])}]" if p in ci else ""

        return MetricRow(
            metric=name,
            group=group,
            n=_count(stats.get("n", 0)),
            p50=_ms(stats.get("p50")),
            p90=_ms(stats.get("p90")),
            p99=_ms(stats.get("p99")),
            p999=_ms(stats.get("p999")),
            maximum=_ms(stats.get("max")),
            p50_ci=bounds("p50"),
            p99_ci=bounds("p99"),
        )

    rows = [row("all", entry)]
    by_stage = entry.get("by_stage", {})
    if len(by_stage) > 1:
        rows += [row(_stage_label(s, k), v) for k, v in by_stage.items()]
    by_class = entry.get("by_class", {})
    if len(by_class) > 1:
        rows += [row(f"class {k}", v) for k, v in by_class.items()]
    return rows


def _ratio_rows(s: Mapping[str, Any]) -> tuple[RatioRow, ...]:
    return tuple(
        RatioRow(name, f"{entry['p99_p50']:.3g}", str(entry["worst_class"]))
        for name, entry in s.get("ratios", {}).items()
        if isinstance(entry.get("p99_p50"), (int, float))
    )


def _status_rows(s: Mapping[str, Any]) -> tuple[StatusRow, ...]:
    total = max(1, s["requests"]["sent"])
    return tuple(
        StatusRow(str(key), _count(n), f"{n / total:.2%}") for key, n in s["status_codes"].items()
    )


def _status_by_stage(s: Mapping[str, Any]) -> StageStatus | None:
    by_stage = s.get("status_mix", {}).get("by_stage", {})
    if len(by_stage) < 2:
        return None
    keys = tuple(str(k) for k in s["status_codes"])
    rows = tuple(
        StageStatusRow(
            stage=_stage_label(s, stage),
            n=_count(sum(entry["counts"].values())),
            shares=tuple(_share(entry["share"].get(k, 0.0)) for k in keys),
        )
        for stage, entry in by_stage.items()
    )
    return StageStatus(statuses=keys, rows=rows)


def _migration(entry: Mapping[str, Any]) -> Migration | None:
    if "baseline" not in entry:
        return None
    base, over = entry["baseline"], entry["overload"]

    def label(side: Mapping[str, Any]) -> str:
        rate = _req_rate(side.get("send_rate"), ".1f")
        return f"stage {side['stage']} ({side['name']}, {rate})"

    def measure(text: str, key: str, fmt: Any = _ms) -> MigrationRow:
        return MigrationRow(text, fmt(base[key]), fmt(over[key]), is_status=False)

    rows = [
        measure("requests", "sent", _count),
        *(
            MigrationRow(str(r["status"]), _share(r["baseline"]), _share(r["overload"]), True)
            for r in entry["rows"]
        ),
        measure("latency p50 (ms)", "latency_p50"),
        measure("latency p99 (ms)", "latency_p99"),
        measure("latency p99/p50", "latency_p99_p50", _ratio),
        measure("time_to_reject p99 (ms)", "time_to_reject_p99"),
    ]
    return Migration(baseline=label(base), overload=label(over), rows=tuple(rows))


def _head_of_line(entry: Mapping[str, Any]) -> HeadOfLine | None:
    if "by_class" not in entry:
        return None
    rows = tuple(
        HeadOfLineRow(
            request_class=str(cls),
            metric=metric,
            baseline_p50=_ms(row["baseline_p50"]),
            mixed_p50=_ms(row["mixed_p50"]),
            ratio_p50=_ratio(row["ratio_p50"]),
            baseline_p99=_ms(row["baseline_p99"]),
            mixed_p99=_ms(row["mixed_p99"]),
            ratio_p99=_ratio(row["ratio_p99"]),
        )
        for cls, metrics in entry["by_class"].items()
        for metric, row in metrics.items()
    )
    return HeadOfLine(str(entry["mixed_stage"]), str(entry["baseline_stage"]), rows)


def _refusals(s: Mapping[str, Any]) -> Refusals | None:
    entry = s.get("retry_after") or {}
    if "refusals" not in entry:
        return None
    reject = s["metrics"].get("time_to_reject", {})
    return Refusals(
        refused=_count(entry["refusals"]),
        reject_p50=_ms(reject.get("p50")),
        reject_p99=_ms(reject.get("p99")),
        retry_after=_share(entry["share"]),
    )


def _facts(s: Mapping[str, Any]) -> tuple[Fact, ...]:
    """The run table of report.html: what was offered, what was achieved, clock offset."""
    load, throughput, clock = s.get("load", {}), s.get("throughput", {}), s["clock"]
    achieved = _number(load.get("achieved_ratio"))
    rows = [
        ("scenario", s["scenario"]["name"]),
        ("description", s["scenario"].get("config", {}).get("description", "")),
        ("target", s["target"]),
        ("api", s["api"]),
        ("started", s["started_at"]),
        ("duration", f"{float(s['duration']):.2f} s"),
        ("loop", "open (arrival rate)" if load.get("open_loop") else "closed (virtual users)"),
        (
            "offered",
            f"{load.get('offered_requests') or NO_VALUE} requests,"
            f" {_req_rate(load.get('offered_rate'))}",
        ),
        (
            "achieved",
            f"{_req_rate(load.get('achieved_rate'))}"
            f" ({NO_VALUE if achieved is None else f'{achieved:.1%}'} of offered)",
        ),
        ("ok throughput", _req_rate(throughput.get("requests_per_s"))),
        ("goodput", _req_rate(throughput.get("goodput_per_s"))),
        (
            "server clock offset",
            f"{clock.get('server_offset_ns', 0)} ns ({clock.get('server_offset_source', '')})",
        ),
    ]
    return tuple(Fact(label, str(value)) for label, value in rows)


def _stage_rows(s: Mapping[str, Any]) -> tuple[StageRow, ...]:
    return tuple(
        StageRow(
            index=str(stage["index"]),
            name=str(stage["name"]),
            start_s=f"{stage['start']:.2f}",
            end_s=f"{stage['end']:.2f}",
            target_rate=_plain(stage.get("target_rate")),
        )
        for stage in s.get("stages", [])
    )


def _flatten(prefix: str, value: Any) -> tuple[Fact, ...]:
    """Nested mappings as dotted labels: {"a": {"b": 1}} -> a.b = 1."""
    if isinstance(value, Mapping):
        return tuple(
            fact
            for k, v in value.items()
            for fact in _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        )
    return (Fact(prefix, _plain(value)),)
