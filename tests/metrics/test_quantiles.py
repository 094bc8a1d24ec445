"""Known-answer and property tests for exact percentiles and their confidence intervals."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zqbench.metrics import quantiles as qs


def exact_binom_cdf(k: int, n: int, q: Fraction) -> Fraction:
    """Reference: the Binomial CDF summed in exact rational arithmetic."""
    return sum((math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1)), Fraction(0))


@pytest.mark.parametrize(
    ("q", "n", "expected"),
    [
        (0.5, 4, 2),
        (0.5, 5, 3),
        (0.9, 10, 9),  # 0.9 * 10 is 9.000000000000002 in binary floating point
        (0.99, 100, 99),
        (0.999, 1000, 999),
        (0.99, 1, 1),
        (0.0, 10, 1),
        (1.0, 10, 10),
        (0.01, 1000, 10),
    ],
)
def test_rank_is_nearest_rank_ceil_qn(q: float, n: int, expected: int) -> None:
    """The 1-based rank is ceil(q n), immune to binary rounding of q n."""
    assert qs.rank(q, n) == expected


def test_quantile_known_answers() -> None:
    """Percentiles of 1..10 are observed values at rank ceil(q n); no interpolation."""
    values = np.arange(1.0, 11.0)
    assert qs.quantile(values, 0.5) == 5.0
    assert qs.quantile(values, 0.9) == 9.0
    assert qs.quantile(values, 0.95) == 10.0
    assert qs.quantile(values, 0.99) == 10.0
    assert qs.quantile(values, 0.0) == 1.0


def test_quantile_of_nothing_is_no_value() -> None:
    """An empty sample has no percentile (None), never 0."""
    assert qs.quantile(np.empty(0), 0.99) is None


@pytest.mark.parametrize(
    ("n", "q", "expected"),
    [
        (5, 0.5, (None, None)),  # 1/32 > 2.5% on each side: no two-sided bound
        (6, 0.5, (1, 6)),  # 1/64 <= 2.5%
        (100, 0.5, (40, 61)),  # the textbook median interval for n = 100
        (367, 0.99, (359, None)),  # 0.99^367 > 2.5%: no finite upper bound for a p99
        (368, 0.99, (360, 368)),
    ],
)
def test_ci_ranks_known_answers(n: int, q: float, expected: tuple[int | None, int | None]) -> None:
    """CI ranks match hand-computed equal-tail binomial ranks."""
    assert qs.ci_ranks(n, q) == expected


@pytest.mark.parametrize(("n", "q"), [(6, 0.5), (40, 0.9), (100, 0.5), (400, 0.99), (1000, 0.99)])
def test_ci_ranks_are_the_tightest_equal_tail_ranks(n: int, q: float) -> None:
    """F(l-1) <= 2.5% < F(l) and F(u-2) < 97.5% <= F(u-1), checked in exact arithmetic;
    hence coverage F(u-1) - F(l-1) >= 95%."""
    low, high = qs.ci_ranks(n, q)
    assert low is not None and high is not None
    fq = Fraction(str(q))
    tail = Fraction(1, 40)
    assert exact_binom_cdf(low - 1, n, fq) <= tail < exact_binom_cdf(low, n, fq)
    assert exact_binom_cdf(high - 2, n, fq) < 1 - tail <= exact_binom_cdf(high - 1, n, fq)
    assert exact_binom_cdf(high - 1, n, fq) - exact_binom_cdf(low - 1, n, fq) >= Fraction(95, 100)


def test_ci_ranks_fast_and_close_to_normal_for_huge_n() -> None:
    """n = 10^9 takes well under a second and lands near n q -+ 1.96 sd."""
    start = time.thread_time()  # CPU time: what the algorithm costs, whatever else runs
    low, high = qs.ci_ranks(10**9 + 7, 0.99)
    spent = time.thread_time() - start
    assert spent < 0.5, f"{spent:.3f} s of CPU for n = 10^9"
    sd = math.sqrt((10**9 + 7) * 0.99 * 0.01)
    assert low is not None and high is not None
    assert abs(low - ((10**9 + 7) * 0.99 - 1.96 * sd)) < 5
    assert abs(high - ((10**9 + 7) * 0.99 + 1.96 * sd)) < 5


def test_quantile_ci_returns_order_statistics() -> None:
    """The CI of the median of 1..100 is [x_(40), x_(61)] = [40, 61]."""
    values = np.arange(1.0, 101.0)
    assert qs.quantile_ci(values, 0.5) == (40.0, 61.0)
    assert qs.quantile_ci(values, 0.99) == (97.0, None)  # P(B <= 96) = 1.84%


def test_wilson_interval_known_answers() -> None:
    """Wilson 95% intervals: 5/100 -> [2.15%, 11.18%]; 0/10 -> [0, 27.75%]; 10/10 -> [72.25%, 1]."""
    low, high = qs.wilson_interval(5, 100)
    assert low == pytest.approx(0.021544, abs=1e-6)
    assert high == pytest.approx(0.111750, abs=1e-6)
    assert qs.wilson_interval(0, 10) == (0.0, pytest.approx(0.277533, abs=1e-6))
    assert qs.wilson_interval(10, 10) == (pytest.approx(0.722467, abs=1e-6), 1.0)
    assert qs.wilson_interval(0, 0) == (None, None)


@pytest.mark.parametrize(
    ("op", "low", "high", "expected"),
    [
        ("<", 1.0, 2.0, "pass"),
        ("<", 3.0, 4.0, "fail"),
        ("<", 2.0, 4.0, "inconclusive"),
        ("<", 1.0, 3.0, "inconclusive"),  # high == T is not below T
        ("<=", 1.0, 3.0, "pass"),
        ("<", 3.0, 5.0, "fail"),  # low == T already violates "< T"
        ("<=", 3.0, 5.0, "inconclusive"),
        (">", 3.5, 5.0, "pass"),
        (">", 1.0, 3.0, "fail"),
        (">=", 3.0, 5.0, "pass"),
        (">=", 1.0, 2.9, "fail"),
        ("<", 1.0, None, "inconclusive"),  # unbounded above
        ("<", None, 2.0, "pass"),
    ],
)
def test_decide(op: str, low: float | None, high: float | None, expected: str) -> None:
    """An interval decides only when it lies wholly on one side of the threshold (T = 3)."""
    assert qs.decide(op, low, high, 3.0) == expected


def test_samples_needed_zero_when_decided() -> None:
    """The median of 1..1000 (CI [469, 532]) is clearly below 600: nothing more is needed."""
    values = np.arange(1.0, 1001.0)
    assert qs.samples_needed(values, 0.5, "<", 600.0) == 0


def test_samples_needed_decides_when_the_distribution_is_replicated() -> None:
    """The estimate is enough: the same distribution with that many samples decides."""
    values = np.arange(1.0, 101.0)  # p50 = 50, CI [40, 61]
    needed = qs.samples_needed(values, 0.5, "<", 58.5)
    assert needed is not None and needed > 0
    total = 100 + needed
    bigger = np.sort(np.repeat(values, math.ceil(total / 100)))
    low, high = qs.quantile_ci(bigger, 0.5)
    assert qs.decide("<", low, high, 58.5) == "pass"


def test_samples_needed_none_when_the_quantile_sits_on_the_threshold() -> None:
    """Exactly half of 1..100 lies below 50.5: no sample size decides 'p50 < 50.5'."""
    assert qs.samples_needed(np.arange(1.0, 101.0), 0.5, "<", 50.5) is None


def test_samples_needed_for_an_unbounded_p99() -> None:
    """A p99 needs 368 samples for an upper bound; far below the threshold, ~268 more do it."""
    values = np.arange(1.0, 101.0)
    needed = qs.samples_needed(values, 0.99, "<", 1000.0)
    assert needed is not None and 268 <= needed <= 270


def test_rate_samples_needed() -> None:
    """1% errors against a 2% limit: 100 requests are not enough, a few hundred are."""
    needed = qs.rate_samples_needed(1, 100, "<", 0.02)
    assert needed is not None and 100 < needed < 1000
    assert qs.rate_samples_needed(0, 1000, "<", 0.02) == 0


sorted_samples = st.lists(
    st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=300
).map(lambda xs: np.sort(np.array(xs)))
fractions = st.floats(min_value=0.001, max_value=0.999)


@given(sorted_samples, fractions, fractions)
def test_quantile_is_monotone_in_q(values: np.ndarray, a: float, b: float) -> None:
    """A higher q never gives a lower percentile."""
    lo, hi = sorted((a, b))
    assert qs.quantile(values, lo) <= qs.quantile(values, hi)


@given(sorted_samples, fractions)
def test_ci_contains_the_point_estimate(values: np.ndarray, q: float) -> None:
    """low <= x_(ceil(q n)) <= high wherever a side is bounded."""
    point = qs.quantile(values, q)
    low, high = qs.quantile_ci(values, q)
    assert low is None or low <= point
    assert high is None or point <= high


@settings(max_examples=60)
@given(st.integers(min_value=1, max_value=400), fractions)
def test_ci_coverage_is_at_least_95_percent(n: int, q: float) -> None:
    """Whenever both ranks exist, P(l <= B <= u - 1) >= 95% for B ~ Binomial(n, q)."""
    low, high = qs.ci_ranks(n, q)
    if low is not None and high is not None:
        assert low < high
        coverage = math.fsum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(low, high))
        assert coverage >= 0.95 - 1e-12
