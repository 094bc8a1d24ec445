"""Compare saved runs: each metric's difference with a 95% CI, and a regression verdict.

    comparison = compare_runs([baseline_dir, candidate_dir], max_regression=0.05)
    comparison.verdict        # "ok" | "regression" | "inconclusive" | "invalid"

compare_render.py writes it out (compare.md, compare.html, compare.json, plots/).

The first run is the baseline; every other run is compared with it.

Confidence interval of a percentile difference (candidate - baseline). Each run's
percentile gets its distribution-free order-statistic CI (`quantiles.quantile_ci`) at
97.5% instead of 95%; the difference then lies in [low_B - high_A, high_B - low_A]
whenever both intervals cover their true percentiles, which happens with probability at
least 1 - 2.5% - 2.5% = 95% (Bonferroni; the runs are independent, so the true coverage
is 1 - 0.025^2 - ... >= 95%). It is exact, distribution-free, needs no resampling (a
million samples cost one sort), and is conservative: it is wider than a bootstrap's,
so "regression" is never claimed on noise. An unbounded side (too few samples for a
p99) stays unbounded. Rates (errors) use the Wilson interval the same way.

Verdict per gated metric, with allowed = max_regression * baseline value (durations) or
max_error_increase (rates, absolute): regression when the CI's low end exceeds allowed;
ok when its high end is at or under allowed; otherwise inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zqbench.errors import EXIT_INVALID, EXIT_OK, EXIT_SLO_FAILED, OptionError, UsageError
from zqbench.metrics import quantiles
from zqbench.metrics.frame import DURATION_METRICS, MetricFrame
from zqbench.metrics.summarize import PERCENTILES
from zqbench.outputs.render import frame_of
from zqbench.outputs.series import Curve, percentile_curve
from zqbench.samples.columns import give_back
from zqbench.saved.run import SavedRun, load_run

CONFIDENCE_EACH = 0.975  # per run, so the difference's interval has >= 95% coverage
DEFAULT_GATED = ("latency:p50", "latency:p99", "ttft:p50", "ttft:p99", "errors:rate")
SHOWN = (
    "latency:p50",
    "latency:p99",
    "latency_corrected:p99",
    "ttft:p50",
    "ttft:p99",
    "tpot:p50",
    "itl:p99",
    "server_queue:p99",
    "dispatch_delay:p99",
    "time_to_reject:p99",
    "errors:rate",
)


@dataclass(frozen=True)
class Stat:
    """'latency:p99' or 'errors:rate'."""

    metric: str
    stat: str

    @property
    def key(self) -> str:
        return f"{self.metric}:{self.stat}"

    @property
    def q(self) -> float:
        return PERCENTILES[self.stat]


def parse_stat(text: str) -> Stat:
    metric, _, stat = text.partition(":")
    if metric == "errors" and stat == "rate":
        return Stat(metric, stat)
    if metric not in DURATION_METRICS or metric == "dispatch_jitter":
        raise OptionError(
            "metrics", "expected a per-request metric, e.g. latency:p99", value=repr(text)
        )
    if stat not in PERCENTILES:
        raise OptionError(
            "metrics", "the statistic must be p50, p90, p95, p99 or p999", value=repr(text)
        )
    return Stat(metric, stat)


@dataclass(frozen=True)
class Diff:
    key: str  # "latency:p99"
    baseline: float | None  # seconds, or a fraction for rates; inf allowed
    candidate: float | None
    diff: float | None  # candidate - baseline
    ci_low: float | None  # None: unbounded (or no value)
    ci_high: float | None
    allowed: float | None  # the largest increase that is not a regression
    verdict: str  # ok | regression | inconclusive | unavailable
    gated: bool
    note: str = ""

    @classmethod
    def without_value(cls, key: str, verdict: str, gated: bool, note: str = "") -> Diff:
        """A statistic one run or both cannot give: no numbers, and why in `note`."""
        return cls(key, None, None, None, None, None, None, verdict, gated, note)

    @property
    def relative(self) -> float | None:
        if self.diff is None or not self.baseline or math.isinf(self.baseline):
            return None
        return self.diff / self.baseline


@dataclass(frozen=True)
class Pair:
    baseline: str
    candidate: str
    diffs: list[Diff]
    verdict: str


# The metrics compare.html draws as percentile curves, each run's overlaid.
FIGURE_METRICS = ("latency", "latency_corrected", "ttft")
Estimate = tuple[float | None, float | None, float | None]  # a percentile and its CI


@dataclass(frozen=True)
class RunStats:
    """What a comparison reads of one run, taken from its metric frame so that the frame is
    let go before the next run's is built: two frames of 3,600,000 requests held together
    peaked at 2,104 MiB (#44). Seconds; each percentile with its CONFIDENCE_EACH interval."""

    n: int
    failed: int  # requests that did not succeed (errors:rate)
    unavailable: dict[str, str | None]  # why each compared metric has no value; None: it has
    estimates: dict[str, Estimate]  # by stat key, for the metrics that have values
    curves: dict[str, Curve | None]  # FIGURE_METRICS' percentile curves

    @classmethod
    def of(cls, frame: MetricFrame, stats: Sequence[Stat]) -> RunStats:
        metrics = {s.metric for s in stats if s.stat != "rate"} | set(FIGURE_METRICS)
        unavailable = {m: frame.unavailable_reason(m) for m in sorted(metrics)}
        estimates: dict[str, Estimate] = {}
        curves: dict[str, Curve | None] = dict.fromkeys(FIGURE_METRICS)
        for metric, reason in unavailable.items():
            if reason is not None:
                continue
            values = frame.sorted_seconds(metric)  # one sort, let go with the loop
            for s in stats:
                if s.metric == metric and s.stat != "rate":
                    estimates[s.key] = (
                        quantiles.quantile(values, s.q),
                        *quantiles.quantile_ci(values, s.q, CONFIDENCE_EACH),
                    )
            if metric in curves:
                curves[metric] = percentile_curve(values)
        failed = int(np.count_nonzero(~frame.ok))
        return cls(frame.n, failed, unavailable, estimates, curves)


@dataclass
class Comparison:
    runs: list[SavedRun]
    pairs: list[Pair]
    verdict: str
    max_regression: float
    max_error_increase: float
    gated: list[str]
    stats: dict[str, RunStats] = field(default_factory=dict, repr=False)  # by run label
    warnings: list[str] = field(default_factory=list)  # e.g. the runs sent other requests


def _sub(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    value = a - b
    return None if math.isnan(value) else value


def _decide(low: float | None, high: float | None, allowed: float) -> str:
    if low is not None and low > allowed:
        return "regression"
    if high is not None and high <= allowed:
        return "ok"
    return "inconclusive"


def _percentile_diff(
    stat: Stat, a: RunStats, b: RunStats, max_regression: float, gated: bool
) -> Diff:
    missing = [r.unavailable[stat.metric] for r in (a, b)]
    note = "; ".join(m for m in missing if m)
    if all(missing):
        return Diff.without_value(stat.key, "unavailable", gated, note)
    ea, eb = (None if m else r.estimates[stat.key] for r, m in zip((a, b), missing, strict=True))
    pa, pb = (None if e is None else e[0] for e in (ea, eb))
    if ea is None or eb is None:
        # The run that has it shows its value (a zero-queue twin's time to reject beside a
        # FIFO baseline that refused nothing); there is no difference to judge.
        return Diff(stat.key, pa, pb, None, None, None, None, "inconclusive", gated, note)
    _, la, ha = ea
    _, lb, hb = eb
    low, high = _sub(lb, ha), _sub(hb, la)
    allowed = max_regression * abs(pa) if pa is not None and math.isfinite(pa) else None
    verdict = "inconclusive" if allowed is None else _decide(low, high, allowed)
    return Diff(stat.key, pa, pb, _sub(pb, pa), low, high, allowed, verdict, gated)


def _rate_diff(stat: Stat, a: RunStats, b: RunStats, max_increase: float, gated: bool) -> Diff:
    if a.n == 0 or b.n == 0:
        return Diff.without_value(stat.key, "unavailable", gated)
    fa, fb = a.failed, b.failed
    z = 2.241402727604947  # standard normal 0.9875 quantile: a 97.5% Wilson interval each
    la, ha = quantiles.wilson_interval(fa, a.n, z)
    lb, hb = quantiles.wilson_interval(fb, b.n, z)
    low, high = _sub(lb, ha), _sub(hb, la)
    ra, rb = fa / a.n, fb / b.n
    return Diff(
        stat.key, ra, rb, rb - ra, low, high, max_increase, _decide(low, high, max_increase), gated
    )


def _worst(verdicts: set[str]) -> str:
    """regression over inconclusive over ok."""
    return next((v for v in ("regression", "inconclusive") if v in verdicts), "ok")


def compare_runs(
    run_dirs: Sequence[Path],
    *,
    max_regression: float = 0.05,
    max_error_increase: float = 0.01,
    metrics: Sequence[str] = (),
) -> Comparison:
    """Compare every run with the first. Raises UsageError (exit 2) for fewer than two
    runs, a folder that is not a run, or a bad --metric."""
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two runs: BASELINE CANDIDATE [...]")
    if not 0 <= max_regression < 10 or not 0 <= max_error_increase <= 1:
        raise UsageError(
            "--max-regression must lie in [0%, 1000%), --max-error-increase in [0%, 100%]"
        )
    gated = [parse_stat(m) for m in (metrics or DEFAULT_GATED)]
    keys = [g.key for g in gated]
    shown = gated + [parse_stat(m) for m in SHOWN if m not in keys]
    runs = [load_run(Path(d)) for d in run_dirs]
    labels = unique_labels(runs)
    # One run's frame at a time: each gives what the comparison reads of it, then goes.
    stats = {}
    for label, run in zip(labels, runs, strict=True):
        stats[label] = RunStats.of(frame_of(run.summary, run.columns()), shown)
        give_back()
    base = stats[labels[0]]
    pairs = []
    for label in labels[1:]:
        diffs = [
            _rate_diff(s, base, stats[label], max_error_increase, s in gated)
            if s.stat == "rate"
            else _percentile_diff(s, base, stats[label], max_regression, s in gated)
            for s in shown
        ]
        judged = {d.verdict for d in diffs if d.gated and d.verdict != "unavailable"}
        pairs.append(Pair(labels[0], label, diffs, _worst(judged)))
    verdict = _worst({p.verdict for p in pairs})
    if any(r.summary.verdict == "invalid" for r in runs):
        verdict = "invalid"
    warnings = [
        w
        for label, run in zip(labels[1:], runs[1:], strict=True)
        if (w := _other_requests(labels[0], runs[0], label, run)) is not None
    ]
    return Comparison(
        runs, pairs, verdict, max_regression, max_error_increase, keys, stats, warnings
    )


def _other_requests(base_label: str, base: SavedRun, label: str, run: SavedRun) -> str | None:
    """Why the two runs did not send the same requests, when a dataset says so."""
    a = base.summary.environment.get("request_source") or {"source": "synthetic"}
    b = run.summary.environment.get("request_source") or {"source": "synthetic"}
    if a.get("source") != b.get("source"):
        why = f"{a.get('source')} requests vs {b.get('source')}"
    elif a.get("sha256") != b.get("sha256"):
        why = f"dataset sha256 {str(a.get('sha256'))[:12]} vs {str(b.get('sha256'))[:12]}"
    else:
        keys = ("order", "prompt_tokens_filter", "output_tokens_filter", "output_lengths")
        changed = [k for k in keys if a.get(k) != b.get(k)]
        if not changed:
            return None
        why = "the same dataset, but another " + ", ".join(changed)
    return f"{label} did not send the requests {base_label} sent ({why}): compare with care"


def unique_labels(runs: Sequence[SavedRun]) -> list[str]:
    """Folder names, made unique with a #2, #3 suffix (two runs may share a name)."""
    labels: list[str] = []
    for run in runs:
        label, i = run.name, 2
        while label in labels:
            label, i = f"{run.name}#{i}", i + 1
        labels.append(label)
    return labels


def exit_code(comparison: Comparison, *, inconclusive_fails: bool = True) -> int:
    """0 no regression, 1 regression (or inconclusive unless allowed), 4 an invalid run."""
    if comparison.verdict == "invalid":
        return EXIT_INVALID
    if comparison.verdict == "regression":
        return EXIT_SLO_FAILED
    if comparison.verdict == "inconclusive" and inconclusive_fails:
        return EXIT_SLO_FAILED
    return EXIT_OK
