"""The hidden-queue detector's slope and bootstrap interval, on known answers."""

from __future__ import annotations

from zqbench.conform.stats import median_slope


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
