"""Exact percentiles, distribution-free confidence intervals, and how many samples would decide.

One percentile definition is used everywhere in zqbench (reports, SLO gates, the
recorder's per-request ITL p99): the **nearest rank**.

    For n sorted values x_(1) <= ... <= x_(n) and 0 < q <= 1, the q-quantile is
    x_(k) with k = ceil(q * n) (1-based); q = 0 gives x_(1).

It is always an observed value (no interpolation, no bucketing). `q * n` is rounded to
9 decimals before the ceiling so that binary floating point does not push 0.99 * 100
to rank 100.

Confidence interval for a quantile (distribution-free, from order statistics): let
B = #{i : X_i <= xi_q}, which is Binomial(n, q) for a continuous distribution. Then

    P(X_(l) <= xi_q <= X_(u)) >= P(l <= B <= u - 1) = F(u - 1) - F(l - 1)

with F the Binomial(n, q) CDF. zqbench takes equal tails: l is the largest rank with
F(l - 1) <= alpha/2, u the smallest with F(u - 1) >= 1 - alpha/2, so the coverage is
at least 1 - alpha (95% by default) for every distribution, ties included (ties make it
conservative). When no rank satisfies a side, that side is unbounded: e.g. the p99 of
fewer than 368 samples has no finite 95% upper bound, because even x_(n) is below the
true p99 with probability 0.99^n > 2.5%.

The Binomial CDF is exact: log-pmf from `math.lgamma` at one anchor and the ratio
pmf(k+1)/pmf(k) = (n-k)/(k+1) * q/(1-q) in a numpy cumulative sum, over the window
mean +- (15 sd + 30). The mass outside that window is below 1e-40 (Chernoff bound),
so no normal approximation is needed and n = 10^9 costs about a millisecond.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from zqbench.summary import SloVerdict

CONFIDENCE = 0.95
Z_95 = 1.959963984540054  # standard normal 0.975 quantile, for the Wilson interval


def rank(q: float, n: int) -> int:
    """The 1-based nearest rank ceil(q * n), clamped to [1, n]."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    if n < 1:
        raise ValueError("rank of an empty sample")
    return min(n, max(1, math.ceil(round(q * n, 9))))


def quantile(sorted_values: np.ndarray, q: float) -> float | None:
    """x_(ceil(q n)) of an ascending array; None (no value) when it is empty."""
    n = len(sorted_values)
    if n == 0:
        return None
    return float(sorted_values[rank(q, n) - 1])


def _binom_window(n: int, q: float) -> tuple[int, np.ndarray]:
    """(k0, cdf) with cdf[i] = P(B <= k0 + i) for B ~ Binomial(n, q), 0 < q < 1."""
    mean = n * q
    sd = math.sqrt(n * q * (1.0 - q))
    width = 15.0 * sd + 30.0
    k0 = max(0, math.floor(mean - width))
    k1 = min(n, math.ceil(mean + width))
    log_ratio_q = math.log(q) - math.log1p(-q)
    log_pmf0 = (
        math.lgamma(n + 1)
        - math.lgamma(k0 + 1)
        - math.lgamma(n - k0 + 1)
        + k0 * math.log(q)
        + (n - k0) * math.log1p(-q)
    )
    k = np.arange(k0, k1, dtype=np.float64)  # steps k -> k + 1
    steps = np.log((n - k) / (k + 1.0)) + log_ratio_q
    log_pmf = np.concatenate(([log_pmf0], log_pmf0 + np.cumsum(steps)))
    return k0, np.cumsum(np.exp(log_pmf))


@functools.lru_cache(maxsize=4096)
def ci_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the distribution-free CI for the q-quantile of n samples.

    None on a side means that side is unbounded (too few samples for that tail).
    """
    if n < 1 or not 0.0 < q < 1.0:
        return None, None
    tail = (1.0 - confidence) / 2.0
    k0, cdf = _binom_window(n, q)
    # cdf[i] = F(k0 + i). Lower rank: largest l >= 1 with F(l - 1) <= tail.
    # F(j) for j < k0 is below 1e-40, so l - 1 = k0 - 1 is always admissible when k0 >= 1.
    below = np.flatnonzero(cdf <= tail)
    if len(below):
        low: int | None = k0 + int(below[-1]) + 1
    elif k0 >= 1:
        low = k0
    else:
        low = None
    # Upper rank: smallest u <= n with F(u - 1) >= 1 - tail.
    above = np.flatnonzero(cdf >= 1.0 - tail)
    up = k0 + int(above[0]) + 1 if len(above) else None
    if up is not None and up > n:
        up = None
    return low, up


def quantile_ci(
    sorted_values: np.ndarray, q: float, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """(low, high) = (x_(l), x_(u)); None on a side that is unbounded."""
    n = len(sorted_values)
    low_rank, high_rank = ci_ranks(n, q, confidence)
    low = None if low_rank is None else float(sorted_values[low_rank - 1])
    high = None if high_rank is None else float(sorted_values[high_rank - 1])
    return low, high


def wilson_interval(
    successes: int, n: int, z: float = Z_95
) -> tuple[float, float] | tuple[None, None]:
    """Wilson score interval for a proportion successes / n (95% for the default z)."""
    if n < 1:
        return None, None
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


# --- deciding a gate --------------------------------------------------------------------
#
# A gate "statistic OP threshold" is decided when its interval lies wholly on one side:
#
#   op    passes when      fails when
#   <     high < T         low >= T
#   <=    high <= T        low > T
#   >     low > T          high <= T
#   >=    low >= T         high < T
#
# An unbounded side (None) is -inf for low and +inf for high.


def decide(op: str, low: float | None, high: float | None, threshold: float) -> SloVerdict:
    """'pass', 'fail' or 'inconclusive' for an interval against `statistic OP threshold`."""
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    if op == "<":
        return "pass" if hi < threshold else "fail" if lo >= threshold else "inconclusive"
    if op == "<=":
        return "pass" if hi <= threshold else "fail" if lo > threshold else "inconclusive"
    if op == ">":
        return "pass" if lo > threshold else "fail" if hi <= threshold else "inconclusive"
    if op == ">=":
        return "pass" if lo >= threshold else "fail" if hi < threshold else "inconclusive"
    raise ValueError(f"unknown operator {op!r}")


_MAX_SAMPLES = 10**9


def _smallest_deciding(n: int, decided) -> int | None:
    """Smallest N >= n with decided(N), assuming decided is (roughly) monotone in N."""
    if decided(n):
        return n
    hi = n
    while True:
        hi *= 2
        if hi > _MAX_SAMPLES:
            return None
        if decided(hi):
            break
    lo = hi // 2  # not decided
    while hi - lo > max(1, lo // 1000):  # 0.1% is precise enough for an estimate
        mid = (lo + hi) // 2
        if decided(mid):
            hi = mid
        else:
            lo = mid
    return hi


def samples_needed(
    sorted_values: np.ndarray,
    q: float,
    op: str,
    threshold: float,
    confidence: float = CONFIDENCE,
) -> int | None:
    """About how many MORE samples would decide `quantile_q OP threshold`.

    Assumes the observed distribution holds: with N samples, the fraction of values
    below (and at or below) the threshold stays what it is now, and the CI ranks are
    those of N samples. Returns 0 when already decided, None when more samples would
    not decide it (the observed quantile sits on the threshold) or n = 0.
    """
    n = len(sorted_values)
    if n == 0 or not 0.0 < q < 1.0:
        return None
    frac_below = int(np.searchsorted(sorted_values, threshold, side="left")) / n
    frac_at_or_below = int(np.searchsorted(sorted_values, threshold, side="right")) / n

    def decided(size: int) -> bool:
        low_rank, high_rank = ci_ranks(size, q, confidence)
        below = math.floor(round(size * frac_below, 6))  # values < T among `size`
        at_or_below = math.floor(round(size * frac_at_or_below, 6))  # values <= T
        # high < T  <=> x_(u) < T   <=> u <= below;     high <= T <=> u <= at_or_below
        # low >= T  <=> x_(l) >= T  <=> l > below;      low > T   <=> l > at_or_below
        high_lt = high_rank is not None and high_rank <= below
        high_le = high_rank is not None and high_rank <= at_or_below
        low_ge = low_rank is not None and low_rank > below
        low_gt = low_rank is not None and low_rank > at_or_below
        return {
            "<": high_lt or low_ge,
            "<=": high_le or low_gt,
            ">": low_gt or high_le,
            ">=": low_ge or high_lt,
        }[op]

    size = _smallest_deciding(n, decided)
    return None if size is None else size - n


def rate_samples_needed(successes: int, n: int, op: str, threshold: float) -> int | None:
    """About how many MORE requests would decide `rate OP threshold` (Wilson interval),
    assuming the observed proportion holds. 0 when decided; None when it never would."""
    if n < 1:
        return None
    p = successes / n

    def decided(size: int) -> bool:
        low, high = wilson_interval(round(p * size), size)
        return decide(op, low, high, threshold) != "inconclusive"

    size = _smallest_deciding(n, decided)
    return None if size is None else size - n
