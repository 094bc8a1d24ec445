"""The hidden-queue detector's slope and bootstrap interval, on known answers."""

from __future__ import annotations

from zqbench.conform.stats import median_slope
from zqbench.metrics.quantiles import wilson_interval


def test_a_linear_rise_gives_its_slope_with_a_tight_interval() -> None:
    steps = [(c, [10.0 * c - 1, 10.0 * c, 10.0 * c + 1]) for c in (1, 2, 4, 8)]
    fit = median_slope(steps, seed=1)
    assert fit is not None
    assert fit.slope == 10.0
    assert 9.0 < fit.ci_low <= 10.0 <= fit.ci_high < 11.0


def test_flat_medians_give_an_interval_around_zero() -> None:
    steps = [(c, [5.0, 5.2, 4.8, 5.1]) for c in (1, 2, 4, 8)]
    fit = median_slope(steps, seed=0)
    assert fit is not None
    assert fit.ci_low <= 0.0 <= fit.ci_high
    assert fit == median_slope(steps, seed=0)  # seeded: the same interval every run


def test_fewer_than_two_usable_steps_give_no_slope() -> None:
    assert median_slope([(1, [5.0]), (2, [])]) is None


def test_wilson_interval_matches_published_values() -> None:
    # Wilson 95% intervals (z = 1.96): the textbook values.
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert round(wilson_interval(24, 48)[0], 3) == 0.364
    assert wilson_interval(0, 0) == (None, None)  # no share: no value (metrics/quantiles.py)


def test_one_slow_request_in_twelve_is_not_a_share_above_ten_percent() -> None:
    # The margins the hidden-queue rule relies on (zqbench/conform/queueing.py).
    assert wilson_interval(1, 12)[0] < 0.10
    assert wilson_interval(3, 12)[0] < 0.10 < wilson_interval(4, 12)[0]
