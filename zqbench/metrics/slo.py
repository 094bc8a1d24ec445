"""The SLO language and the gate: `METRIC[:AGG] OP VALUE[UNIT]` -> pass / fail / inconclusive.

Grammar (whitespace around OP and before UNIT is allowed):

    METRIC   a duration metric (latency, ttft, ...), a count (reasoning_tokens: thinking
             tokens of the answers that thought), a rate (errors, status_<code>, or
             an outcome: served, queued, refused_fast, refused_slow, ... over every request,
             or false_refusals: refusals made while a slot was free, over every request),
             or a scalar (goodput, throughput, gpu_density)
    AGG      pNN (p50, p99, p99.9; p999 = p99.9), pNN/pNN (ratio), mean, min, max, rate
    OP       <  <=  >  >=
    VALUE    a decimal number
    UNIT     us, ms, s, min, h (durations: required), % (rates and gpu_density: optional)

How each gate decides (95% intervals):

    percentile   distribution-free order-statistic CI (quantiles.py): pass when the CI
                 lies on the right side of the threshold, fail when it lies on the wrong
                 side, otherwise inconclusive with "about N more samples would decide"
    rate         Wilson score interval for the proportion, same rule
    pNN/pNN      per request class with enough samples, the ratio of the two percentiles
                 with an interval from their order-statistic CIs, each at 97.5% so that
                 both hold at once with 95% (Bonferroni): [top_low / bottom_high,
                 top_high / bottom_low]; the run's ratio is the worst class, its interval
                 [max of the lows, max of the highs]; same rule as a percentile
    mean/min/max point estimate (no CI); a scalar (goodput, gpu_density) likewise
    unavailable  inconclusive, with the reason the metric has no value
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from zqbench.errors import UsageError
from zqbench.metrics import quantiles
from zqbench.metrics.classify import OUTCOMES
from zqbench.metrics.frame import DURATION_METRICS, GOODPUT_METRICS, MetricFrame
from zqbench.metrics.sig_digits import significant
from zqbench.summary import SloRecord, SloVerdict, Verdict, json_number

FALSE_REFUSALS = "false_refusals"  # refusals made while a slot was free, over every request
RATE_METRICS = ("errors", "status_<code>", *OUTCOMES, FALSE_REFUSALS)
SCALAR_METRICS = ("goodput", "throughput", "gpu_density")
# Per-request counts (no unit), over the requests that have one: thinking tokens, over the
# successful answers that carried thinking (zqbench.metrics.sections.reasoning).
COUNT_METRICS = ("reasoning_tokens",)
KNOWN_METRICS = (*DURATION_METRICS, *COUNT_METRICS, *RATE_METRICS, *SCALAR_METRICS)
# units per second
TIME_UNITS = {"us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0, "min": 1 / 60, "h": 1 / 3600}

_SYNTAX = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?::(?P<agg>[^<>=\s]+))?"
    r"\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
    r"\s*(?P<unit>[A-Za-zµ%]+)?\s*$"
)
_PERCENTILE = re.compile(r"^p(?P<digits>[0-9]+(?:\.[0-9]+)?)$")
_STATUS = re.compile(r"^status_(?P<code>[0-9]{1,3})$")

_FORM = "expected METRIC[:AGG] OP VALUE[UNIT], e.g. latency:p99<150ms"
_AGGS = "pNN (p50, p99, p99.9), pNN/pNN, mean, min, max"


@dataclass(frozen=True)
class Slo:
    """One parsed SLO. `threshold` is in base units: seconds, a fraction, req/s or a ratio."""

    expr: str
    metric: str
    agg: str  # "p99", "p99/p50", "mean", "min", "max", "rate" or "value"
    op: str
    threshold: float
    unit: str  # as written ("ms", "%", "")
    q: float | None = None  # the percentile as a fraction, for "pNN"
    ratio: tuple[float, float] | None = None  # (q_top, q_bottom) for "pNN/pNN"


def _bad(text: str, why: str) -> UsageError:
    return UsageError(f"bad SLO {text!r}: {why}")


def _percentile(text: str, agg: str) -> float:
    """'p99' -> 0.99, 'p99.9' and 'p999' -> 0.999, 'p50' -> 0.5."""
    match = _PERCENTILE.match(agg)
    if match is None:
        raise _bad(text, f"{agg!r} is not an aggregate; allowed: {_AGGS}")
    digits = match["digits"]
    if "." not in digits and len(digits) > 2 and digits.startswith("99"):
        digits = "99." + digits[2:]
    percent = float(digits)
    if not 0.0 < percent < 100.0:
        raise _bad(text, f"percentile {agg!r} must lie strictly between p0 and p100")
    return round(percent / 100.0, 12)


def parse_slo(text: str) -> Slo:
    """Parse one SLO expression; a bad one raises UsageError with a one-line message."""
    slo = _parse(text)
    if not math.isfinite(slo.threshold):
        # 2e308 reads as inf (or 1e308us overflows in seconds): it would pass the plan and
        # fail the summary after the whole load.
        raise _bad(text, "the threshold must be a finite number (at most about 1.8e308)")
    return slo


def _parse(text: str) -> Slo:
    match = _SYNTAX.match(text)
    if match is None:
        raise _bad(text, f"{_FORM} (OP: < <= > >=; units: us ms s min h %)")
    metric, agg, op, unit = match["metric"], match["agg"], match["op"], match["unit"] or ""
    value = float(match["value"])
    if unit and unit not in TIME_UNITS and unit != "%":
        raise _bad(text, f"unknown unit {unit!r}; allowed: us, ms, s, min, h, %")

    if metric in DURATION_METRICS:
        if agg is None:
            raise _bad(text, f"{metric} needs an aggregate, e.g. {metric}:p99; allowed: {_AGGS}")
        if "/" in agg:
            top, _, bottom = agg.partition("/")
            ratio = (_percentile(text, top), _percentile(text, bottom))
            if unit:
                raise _bad(text, f"a ratio {agg} takes no unit")
            return Slo(text, metric, agg, op, value, "", ratio=ratio)
        q = None if agg in ("mean", "min", "max") else _percentile(text, agg)
        if unit not in TIME_UNITS:
            raise _bad(text, f"{metric}:{agg} needs a time unit: us, ms, s, min or h")
        return Slo(text, metric, agg, op, value / TIME_UNITS[unit], unit, q=q)

    if metric in COUNT_METRICS:
        if agg is None or "/" in agg:
            raise _bad(text, f"{metric} needs an aggregate, e.g. {metric}:mean; allowed: {_AGGS}")
        if unit:
            raise _bad(text, f"{metric} is a count of tokens and takes no unit")
        q = None if agg in ("mean", "min", "max") else _percentile(text, agg)
        return Slo(text, metric, agg, op, value, "", q=q)

    if metric in ("errors", FALSE_REFUSALS) or metric in OUTCOMES or _STATUS.match(metric):
        if agg not in (None, "rate"):
            raise _bad(text, f"{metric} takes only the aggregate 'rate'")
        if unit not in ("", "%"):
            raise _bad(text, f"a rate takes no unit or %, not {unit!r}")
        fraction = value / 100.0 if unit == "%" else value
        if fraction > 1.0:
            raise _bad(text, "a rate lies between 0 and 1 (0% and 100%)")
        return Slo(text, metric, "rate", op, fraction, unit)

    if metric in SCALAR_METRICS:
        if agg is not None:
            raise _bad(text, f"{metric} takes no aggregate, e.g. {metric}>=0.85")
        if metric == "gpu_density" and unit not in ("", "%"):
            raise _bad(text, f"gpu_density is a fraction: no unit or %, not {unit!r}")
        if metric != "gpu_density" and unit:
            raise _bad(text, f"{metric} is in requests per second and takes no unit")
        return Slo(text, metric, "value", op, value / 100.0 if unit == "%" else value, unit)

    known = ", ".join(KNOWN_METRICS)
    raise _bad(text, f"unknown metric {metric!r}; known: {known}")


def parse_slos(texts: Sequence[str]) -> list[Slo]:
    return [parse_slo(text) for text in texts]


def goodput_bounds(slos: Sequence[Slo]) -> list[tuple[str, str, float]]:
    """The per-request bounds that define goodput: every upper-bound SLO (< or <=) on a
    per-request duration metric, whatever its aggregate (a request either meets the
    threshold or not). Ratios are not per-request bounds."""
    return [
        (s.metric, s.op, s.threshold)
        for s in slos
        if s.metric in GOODPUT_METRICS and s.op in ("<", "<=") and s.ratio is None
    ]


# --- formatting -------------------------------------------------------------------------


def format_value(value: float | None, unit: str) -> str:
    """A value in its SLO's units: seconds shown in the unit written, fractions as %."""
    if value is None:
        return "n/a"
    if math.isinf(value):
        return "inf"
    if unit in TIME_UNITS:
        return f"{significant(value * TIME_UNITS[unit])} {unit}"
    if unit == "%":
        return f"{significant(value * 100)}%"
    return significant(value)


def _interval(low: float | None, high: float | None, unit: str) -> str:
    lo = "-inf" if low is None else format_value(low, unit)
    hi = "+inf" if high is None else format_value(high, unit)
    return f"[{lo}, {hi}]"


def _tail(verdict: str, op: str, threshold: str, needed: int | None) -> str:
    if verdict == "pass":
        return f"{op} {threshold}: pass"
    if verdict == "fail":
        return f"not {op} {threshold}: fail"
    if needed is None:
        return f"straddles {threshold}: inconclusive; more samples would not decide it"
    return f"straddles {threshold}: inconclusive; about {needed:,} more samples would decide"


# --- evaluation -------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """What the gate reads besides the per-request frame."""

    duration_s: float
    goodput: float | None = None  # req/s
    throughput: float | None = None  # req/s
    telemetry: Mapping[str, float] | None = None  # e.g. {"gpu_density": 0.91}
    min_ratio_samples: int = 100


def _result(
    slo: Slo,
    value: float | None,
    verdict: SloVerdict,
    message: str,
    low: float | None = None,
    high: float | None = None,
    *,
    n: int = 0,
    needed: int | None = None,
) -> SloRecord:
    """The result of `slo` as summary.json holds it: its value (None: unavailable; may be
    "inf", error-adjusted), verdict and message, the interval it was decided by (None:
    unbounded, or no interval)."""
    return SloRecord(
        expr=slo.expr,
        metric=slo.metric,
        value=json_number(value),
        threshold=slo.threshold,
        verdict=verdict,
        ci_low=json_number(low),
        ci_high=json_number(high),
        n=n,
        samples_needed=needed,
        message=message,
    )


def _unavailable(slo: Slo, reason: str) -> SloRecord:
    return _result(slo, None, "inconclusive", f"{slo.metric} unavailable: {reason}")


def _evaluate_percentile(slo: Slo, values: np.ndarray, q: float) -> SloRecord:
    point = quantiles.quantile(values, q)
    low, high = quantiles.quantile_ci(values, q)
    verdict = quantiles.decide(slo.op, low, high, slo.threshold)
    needed = None
    if verdict == "inconclusive":
        needed = quantiles.samples_needed(values, q, slo.op, slo.threshold)
    unit = slo.unit
    threshold = format_value(slo.threshold, unit)
    message = (
        f"{slo.agg} = {format_value(point, unit)}, 95% CI {_interval(low, high, unit)}"
        f" (n = {len(values):,}) {_tail(verdict, slo.op, threshold, needed)}"
    )
    return _result(slo, point, verdict, message, low, high, n=len(values), needed=needed)


def _point(slo: Slo, value: float, n: int, what: str) -> SloRecord:
    verdict = quantiles.decide(slo.op, value, value, slo.threshold)
    threshold = format_value(slo.threshold, slo.unit)
    message = (
        f"{what} = {format_value(value, slo.unit)} (point estimate, no CI)"
        f" {_tail(verdict, slo.op, threshold, None)}"
    )
    return _result(slo, value, verdict, message, n=n)


RATIO_CI_EACH = 0.975  # per percentile: both intervals hold at once with >= 95% (Bonferroni)


def ratio_interval(
    values: np.ndarray, top: float, bottom: float
) -> tuple[float | None, float | None, float | None]:
    """(point, low, high) of quantile(top) / quantile(bottom) of an ascending array of
    positive durations; None for no ratio (a bottom of 0 s), or for an unbounded side."""
    numerator = quantiles.quantile(values, top)
    denominator = quantiles.quantile(values, bottom)
    if not denominator or numerator is None:  # p50 of 0 s: no meaningful ratio
        return None, None, None
    top_low, top_high = quantiles.quantile_ci(values, top, RATIO_CI_EACH)
    bottom_low, bottom_high = quantiles.quantile_ci(values, bottom, RATIO_CI_EACH)
    low = None if top_low is None or not bottom_high else top_low / bottom_high
    high = None if top_high is None or not bottom_low else top_high / bottom_low
    return numerator / denominator, low, high


def _evaluate_ratio(
    slo: Slo, ratio: tuple[float, float], frame: MetricFrame, evidence: Evidence
) -> SloRecord:
    """The worst class's ratio; its interval holds the largest true ratio whenever every
    class's interval holds its own: [max of the lows, max of the highs]."""
    worst: tuple[float, str, int] | None = None
    lows: list[float | None] = []
    highs: list[float | None] = []
    for name in frame.classes:
        values = frame.sorted_seconds(slo.metric, frame.mask(request_class=name))
        if len(values) < evidence.min_ratio_samples:
            continue
        value, low, high = ratio_interval(values, *ratio)
        if value is None:
            continue
        lows.append(low)
        highs.append(high)
        if worst is None or value > worst[0]:
            worst = (value, name, len(values))
    if worst is None:
        return _unavailable(
            slo,
            f"no request class has {evidence.min_ratio_samples} or more samples; lower "
            "[validity] min_ratio_samples or --min-ratio-samples, or run longer",
        )
    value, name, n = worst
    low = max((x for x in lows if x is not None), default=None)
    high = None if None in highs else max(h for h in highs if h is not None)
    verdict = quantiles.decide(slo.op, low, high, slo.threshold)
    threshold = format_value(slo.threshold, slo.unit)
    tail = _tail(verdict, slo.op, threshold, None)
    if verdict == "inconclusive":  # a ratio's interval narrows with samples, as a percentile's
        tail = f"straddles {threshold}: inconclusive; more samples would narrow the interval"
    message = (
        f"{slo.agg} (worst class {name!r}, n = {n:,}) = {format_value(value, slo.unit)},"
        f" 95% CI {_interval(low, high, slo.unit)} {tail}"
    )
    return _result(slo, value, verdict, message, low, high, n=n)


def _evaluate_rate(slo: Slo, frame: MetricFrame) -> SloRecord:
    n = frame.n
    if n == 0:
        return _unavailable(slo, "no request sent")
    if slo.metric == "errors":
        hits = int(np.count_nonzero(~frame.ok))
    elif slo.metric.startswith("status_"):
        code = int(slo.metric.removeprefix("status_"))
        hits = int(np.count_nonzero(frame.columns.status == code))
    elif frame.outcomes is None:  # an outcome's rate, or false refusals'
        return _unavailable(slo, "the run judged no outcomes (saved before zqbench did)")
    elif slo.metric in OUTCOMES:
        hits = int(np.count_nonzero(frame.outcomes.outcome == OUTCOMES.index(slo.metric)))
    elif frame.outcomes.refusals.capacity is None:
        return _unavailable(slo, "no capacity to judge refusals by (none stated, none seen)")
    else:
        hits = int(np.count_nonzero(frame.outcomes.refusals.false))
    rate = hits / n
    low, high = quantiles.wilson_interval(hits, n)
    verdict = quantiles.decide(slo.op, low, high, slo.threshold)
    needed = None
    if verdict == "inconclusive":
        needed = quantiles.rate_samples_needed(hits, n, slo.op, slo.threshold)
    unit = "%"
    message = (
        f"rate = {format_value(rate, unit)} ({hits:,} of {n:,}), 95% Wilson CI"
        f" {_interval(low, high, unit)}"
        f" {_tail(verdict, slo.op, format_value(slo.threshold, unit), needed)}"
    )
    return _result(slo, rate, verdict, message, low, high, n=n, needed=needed)


def _evaluate_scalar(slo: Slo, evidence: Evidence) -> SloRecord:
    if slo.metric == "gpu_density":
        value = (evidence.telemetry or {}).get("gpu_density")
        if value is None:
            return _unavailable(slo, "no GPU telemetry was collected")
        return _point(slo, float(value), 0, "gpu_density")
    value = evidence.goodput if slo.metric == "goodput" else evidence.throughput
    if value is None:
        return _unavailable(slo, "the run has no duration")
    return _point(slo, value, 0, f"{slo.metric} (req/s)")


def evaluate_slo(slo: Slo, frame: MetricFrame, evidence: Evidence) -> SloRecord:
    """Decide one SLO against the run's per-request metrics."""
    if slo.agg == "rate":
        return _evaluate_rate(slo, frame)
    if slo.agg == "value":
        return _evaluate_scalar(slo, evidence)
    if slo.metric in COUNT_METRICS:
        values = frame.sorted_counts(slo.metric)
        if len(values) == 0:
            return _unavailable(slo, "no successful answer carried thinking")
    else:
        reason = frame.unavailable_reason(slo.metric)
        if reason is not None:
            return _unavailable(slo, reason)
        if slo.ratio is not None:
            return _evaluate_ratio(slo, slo.ratio, frame, evidence)
        values = frame.sorted_seconds(slo.metric)
    if len(values) == 0:
        return _unavailable(slo, "no value")
    if slo.q is not None:
        return _evaluate_percentile(slo, values, slo.q)
    if slo.agg == "mean":
        finite = values[np.isfinite(values)]
        if len(finite) < len(values):
            return _point(slo, math.inf, len(values), "mean")
        return _point(slo, float(np.mean(values)), len(values), "mean")
    value = float(values[-1] if slo.agg == "max" else values[0])
    return _point(slo, value, len(values), slo.agg)


def run_verdict(valid: bool, results: Sequence[SloRecord], *, stopped: bool = False) -> Verdict:
    """invalid if the run is invalid; else fail if a [stop] rule tripped (`stopped`: the
    target saturated) or any SLO fails; else inconclusive if any is inconclusive; else
    pass (also with no SLOs)."""
    if not valid:
        return "invalid"
    verdicts = {r.verdict for r in results}
    if stopped or "fail" in verdicts:
        return "fail"
    if "inconclusive" in verdicts:
        return "inconclusive"
    return "pass"
