"""The `[stop]` rules' pure judgements (zqbench.stop.rules) against ground truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zqbench.metrics.classify import FAILED, QUEUED, REFUSED_IN_STREAM, SERVED
from zqbench.stop.config import ErrorRateRule, QueuedShareRule, QueueGrowthRule
from zqbench.stop.rules import (
    MIN_INFLIGHT_POINTS,
    Trip,
    Window,
    queue_growth,
    slope_bound,
    t_quantile,
)

# --------------------------------------------------------------------------- t_quantile

# Student's t quantiles, from any printed table (4 decimals).
T_TABLE = [
    (0.95, 3, 2.3534),
    (0.95, 5, 2.0150),
    (0.95, 10, 1.8125),
    (0.95, 30, 1.6973),
    (0.975, 5, 2.5706),
]


@pytest.mark.parametrize(("confidence", "dof", "exact"), T_TABLE)
def test_t_quantile_within_half_a_percent(confidence: float, dof: int, exact: float) -> None:
    assert t_quantile(confidence, dof) == pytest.approx(exact, rel=0.005)


def test_t_quantile_tends_to_the_normal() -> None:
    # 1.6449: the one-sided 95% normal quantile; t falls towards it as dof grow
    values = [t_quantile(0.95, d) for d in (3, 5, 10, 30, 1000, 10**6)]
    assert values == sorted(values, reverse=True)
    assert values[-2] == pytest.approx(1.6464, abs=1e-4)  # t(0.95, 1000), tabled
    assert values[-1] == pytest.approx(1.6449, abs=1e-4)


# The docstring promises 0.5% "from 3 degrees of freedom", whatever the confidence, and
# [stop.queue_growth] confidence takes anything in (0.5, 1).
@pytest.mark.parametrize(("confidence", "exact"), [(0.975, 3.1824), (0.99, 4.5407)])
def test_t_quantile_promise_at_3_dof_for_higher_confidences(
    confidence: float, exact: float
) -> None:
    assert t_quantile(confidence, 3) == pytest.approx(exact, rel=0.005)


def test_t_quantile_at_the_fewest_inflight_readings_queue_growth_judges() -> None:
    """queue_growth fits the in-flight slope on as few as MIN_INFLIGHT_POINTS readings, so
    slope_bound asks for t with n - 2 = 2 degrees of freedom. Exact for 2 dof, closed form:
    (2p - 1) / sqrt(2 p (1 - p))."""
    dof = MIN_INFLIGHT_POINTS - 2
    p = 0.95
    exact = (2 * p - 1) / math.sqrt(2 * p * (1 - p))  # 2.9200
    assert exact == pytest.approx(2.9200, abs=1e-4)
    assert t_quantile(p, dof) == pytest.approx(exact, rel=0.005)


# --------------------------------------------------------------------------- slope_bound


@pytest.mark.parametrize(("slope", "intercept"), [(2.5, -1.0), (-0.75, 3.0), (0.0, 4.0)])
def test_slope_bound_on_an_exact_line(slope: float, intercept: float) -> None:
    x = np.linspace(0.0, 3.0, 7)
    got = slope_bound(x, slope * x + intercept, 0.95)
    assert got is not None
    s, low = got
    assert s == pytest.approx(slope, abs=1e-12)
    assert low == pytest.approx(slope, abs=1e-9)  # no noise: no doubt


# A fixed noisy dataset: 12 points, 10 degrees of freedom.
NOISY_X = np.array([0.0, 0.3, 0.5, 0.9, 1.2, 1.4, 1.8, 2.1, 2.2, 2.6, 2.9, 3.0])
NOISY_Y = np.array([1.02, 1.31, 1.37, 1.88, 2.05, 2.38, 2.61, 3.05, 2.97, 3.48, 3.62, 3.99])


def test_slope_bound_on_a_noisy_dataset_matches_polyfit() -> None:
    n = len(NOISY_X)
    slope, intercept = np.polyfit(NOISY_X, NOISY_Y, 1)
    residuals = NOISY_Y - (slope * NOISY_X + intercept)
    residual_se = math.sqrt(float(residuals @ residuals) / (n - 2))
    slope_se = residual_se / math.sqrt(float(((NOISY_X - NOISY_X.mean()) ** 2).sum()))
    for confidence, t in ((0.95, 1.8125), (0.975, 2.2281)):  # t with 10 dof, tabled
        got = slope_bound(NOISY_X, NOISY_Y, confidence)
        assert got is not None
        s, low = got
        assert s == pytest.approx(slope, rel=1e-9)
        expected_low = slope - t * slope_se
        # t_quantile is within 0.5% of t: the bound within 0.5% of t * se
        assert low == pytest.approx(expected_low, abs=0.005 * t * slope_se)
        assert low < s


def test_slope_bound_lower_at_higher_confidence() -> None:
    lows = [slope_bound(NOISY_X, NOISY_Y, c) for c in (0.8, 0.95, 0.99)]
    assert all(v is not None for v in lows)
    values = [v[1] for v in lows if v is not None]
    assert values[0] > values[1] > values[2]


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ([], []),
        ([1.0], [2.0]),
        ([1.0, 2.0], [2.0, 4.0]),  # 2 points: a line, but no residual to judge it by
        ([2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0]),  # no spread in x
    ],
)
def test_slope_bound_none(x: list[float], y: list[float]) -> None:
    assert slope_bound(np.array(x), np.array(y), 0.95) is None


def test_slope_bound_on_three_points() -> None:
    got = slope_bound(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0]), 0.95)
    assert got is not None
    assert got[0] == pytest.approx(1.0)


# --------------------------------------------------------------------------- error_rate


def _judged(rule: ErrorRateRule | QueuedShareRule, hits: int, n: int) -> Trip | None:
    """The rule's judgement of a window of n answers, `hits` of them failed (or queued)."""
    outcome = np.array([FAILED if isinstance(rule, ErrorRateRule) else QUEUED] * hits)
    outcome = np.concatenate((outcome, np.full(n - hits, SERVED))).astype(np.int64)
    empty = np.zeros(0)
    return rule.judge(Window(outcome, empty, empty, empty, empty, empty, allowance_s=0.1))


ERR = ErrorRateRule(above=0.5, window_s=5.0, min_requests=20)


def test_error_rate_no_verdict_below_min_requests() -> None:
    assert _judged(ERR, 19, 19) is None  # every one failed, but too few answered


def test_error_rate_no_trip_at_exactly_above() -> None:
    assert _judged(ERR, 10, 20) is None
    assert _judged(ErrorRateRule(above=0.3, min_requests=2), 3, 10) is None


def test_error_rate_trips_just_past_above() -> None:
    trip = _judged(ERR, 11, 20)
    assert trip is not None
    assert trip.rule == "error_rate"
    assert trip.reason == (
        "11 of 20 requests answered in the last 5 s failed or timed out (55% > 50%)"
    )
    assert (trip.measured, trip.bound, trip.requests) == (0.55, 0.5, 20)
    assert trip.growth is None


def test_error_rate_with_refusals_counted_says_so() -> None:
    rule = ErrorRateRule(above=0.25, window_s=0.5, min_requests=4, count_refusals=True)
    trip = _judged(rule, 3, 4)
    assert trip is not None
    assert trip.reason == (
        "3 of 4 requests answered in the last 0.5 s failed, timed out or were refused (75% > 25%)"
    )


def test_error_rate_just_past_by_one_request_in_many() -> None:
    trip = _judged(ERR, 101, 200)
    assert trip is not None
    assert trip.measured == pytest.approx(0.505)
    # Whole percent would read "50% > 50%": one decimal where it would.
    assert trip.reason.endswith("failed or timed out (50.5% > 50%)")


def test_error_rate_nothing_answered() -> None:
    assert _judged(ErrorRateRule(above=0.5, min_requests=0), 0, 0) is None


# --------------------------------------------------------------------------- queued_share

QS = QueuedShareRule(above=0.5, window_s=5.0, min_requests=20)


def test_queued_share_no_verdict_below_min_requests() -> None:
    assert _judged(QS, 19, 19) is None


def test_queued_share_no_trip_at_exactly_above() -> None:
    assert _judged(QS, 10, 20) is None


def test_queued_share_trips_just_past_above() -> None:
    trip = _judged(QS, 11, 20)
    assert trip is not None
    assert trip.rule == "queued_share"
    assert trip.reason == ("11 of 20 admitted requests in the last 5 s were queued (55% > 50%)")
    assert (trip.measured, trip.bound, trip.requests) == (0.55, 0.5, 20)


def test_queued_share_nothing_judged() -> None:
    assert _judged(QueuedShareRule(above=0.5, min_requests=0), 0, 0) is None


# --------------------------------------------------------------------------- queue_growth

QG = QueueGrowthRule(window_s=3.0, confidence=0.95, min_requests=10)
MIN_RISE = 0.080


def fifo_window(
    seed: int = 7,
    n_sends: int = 60,
    wait_per_s: float = 0.100,
    wait_noise: float = 0.010,
    inflight_per_s: float = 1.0,
    n_inflight: int = 7,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A window from t = 10 s to 13 s: sends spread over it, each waiting `wait_per_s`
    longer per second of send time; the in-flight count read every 0.5 s."""
    rng = np.random.default_rng(seed)
    send = np.sort(rng.uniform(10.0, 13.0, n_sends))
    wait = 0.050 + wait_per_s * (send - 10.0) + rng.normal(0.0, wait_noise, n_sends)
    t = np.linspace(10.0, 13.0, n_inflight)
    inflight = np.round(20 + inflight_per_s * (t - 10.0) + rng.normal(0.0, 0.3, n_inflight))
    return send, wait, t, inflight.astype(np.int64)


def test_queue_growth_trips_on_a_fifo_queue() -> None:
    send, wait, t, inflight = fifo_window()
    trip = queue_growth(QG, "server_queue", send, wait, t, inflight, MIN_RISE)
    assert trip is not None
    g = trip.growth
    assert g is not None
    assert trip.rule == "queue_growth"
    assert g.wait_by == "server_queue"
    assert g.wait_slope == pytest.approx(0.100, abs=0.015)
    assert 0 < g.wait_slope_low < g.wait_slope
    assert g.inflight_slope == pytest.approx(1.0, abs=0.3)
    assert 0 < g.inflight_slope_low < g.inflight_slope
    assert g.inflight_now == int(inflight[-1])
    assert g.min_rise == MIN_RISE
    assert g.wait_rise_low >= MIN_RISE
    assert g.wait_rise_low == pytest.approx(g.wait_slope_low * (send.max() - send.min()))
    assert (trip.measured, trip.bound, trip.requests) == (g.wait_rise_low, MIN_RISE, len(send))
    assert trip.reason.startswith(
        f"a queue is growing: {int(inflight[-1])} requests in flight, rising by "
        f"{g.inflight_slope:.1f}/s (at least {g.inflight_slope_low:.1f}/s at 95%), and each "
        f"admitted request's server_queue rising by {g.wait_slope * 1e3:.0f} ms/s"
    )
    assert trip.reason.endswith(f"over its {len(send)} requests (> 80 ms)")


def test_queue_growth_by_ttft_names_it() -> None:
    send, wait, t, inflight = fifo_window()
    trip = queue_growth(QG, "ttft", send, wait, t, inflight, MIN_RISE)
    assert trip is not None and trip.growth is not None
    assert trip.growth.wait_by == "ttft"
    assert "each admitted request's ttft rising" in trip.reason


def test_queue_growth_zero_queue_server_filling_its_slots() -> None:
    """In-flight rising while each wait stays flat (noise only): no queue."""
    send, wait, t, inflight = fifo_window(wait_per_s=0.0, wait_noise=0.005)
    counts = slope_bound(t, inflight.astype(float), 0.95)
    assert counts is not None and counts[1] > 0  # the in-flight rise is real
    waits = slope_bound(send, wait, 0.95)
    assert waits is not None and waits[1] * (send.max() - send.min()) < MIN_RISE
    assert queue_growth(QG, "ttft", send, wait, t, inflight, MIN_RISE) is None


@pytest.mark.parametrize("seed", range(10))
def test_queue_growth_flat_wait_never_trips(seed: int) -> None:
    send, wait, t, inflight = fifo_window(seed=seed, wait_per_s=0.0, wait_noise=0.005)
    assert queue_growth(QG, "ttft", send, wait, t, inflight, MIN_RISE) is None


def test_queue_growth_in_flight_flat_wait_rising() -> None:
    """Both must rise: waits growing while the in-flight count holds is no queue forming."""
    send, wait, t, inflight = fifo_window(inflight_per_s=0.0)
    inflight = np.full_like(inflight, 20)
    inflight[::2] = 21  # noise, no trend
    assert queue_growth(QG, "server_queue", send, wait, t, inflight, MIN_RISE) is None


def test_queue_growth_wait_rising_less_than_min_rise() -> None:
    # 10 ms/s over 3 s: 30 ms of rise, surely positive but under the 80 ms asked
    send, wait, t, inflight = fifo_window(wait_per_s=0.010, wait_noise=0.001)
    waits = slope_bound(send, wait, 0.95)
    assert waits is not None and waits[1] > 0
    assert queue_growth(QG, "server_queue", send, wait, t, inflight, MIN_RISE) is None
    # the same window trips once the rise asked for is smaller than it
    trip = queue_growth(QG, "server_queue", send, wait, t, inflight, 0.010)
    assert trip is not None and trip.growth is not None
    assert trip.growth.wait_rise_low >= 0.010


def test_queue_growth_needs_min_requests_waits() -> None:
    send, wait, t, inflight = fifo_window(n_sends=QG.min_requests)
    assert queue_growth(QG, "server_queue", send, wait, t, inflight, MIN_RISE) is not None
    short = slice(0, QG.min_requests - 1)
    assert queue_growth(QG, "server_queue", send[short], wait[short], t, inflight, MIN_RISE) is None


def test_queue_growth_needs_min_inflight_readings() -> None:
    send, wait, _, _ = fifo_window()
    t = np.array([10.0, 11.0, 12.0, 13.0])
    inflight = np.array([20, 21, 22, 23])
    assert MIN_INFLIGHT_POINTS == 4
    assert queue_growth(QG, "server_queue", send, wait, t, inflight, MIN_RISE) is not None
    assert queue_growth(QG, "server_queue", send, wait, t[1:], inflight[1:], MIN_RISE) is None


def test_queue_growth_no_spread_in_send_times() -> None:
    send, wait, t, inflight = fifo_window()
    same = np.full_like(send, 11.0)
    assert queue_growth(QG, "server_queue", same, wait, t, inflight, MIN_RISE) is None


def test_error_rate_counts_a_refusal_in_disguise_as_a_refusal_never_a_failure() -> None:
    """20 answers: 10 served, 10 refused in the stream of a 200. As failures they would
    trip the breaker (50% > 25%); they are refusals, counted only with count_refusals."""
    outcome = np.array([REFUSED_IN_STREAM] * 10 + [SERVED] * 10, dtype=np.int64)
    empty = np.zeros(0)
    window = Window(outcome, empty, empty, empty, empty, empty, allowance_s=0.1)
    assert ErrorRateRule(above=0.25, min_requests=20).judge(window) is None
    trip = ErrorRateRule(above=0.25, min_requests=20, count_refusals=True).judge(window)
    assert trip is not None and trip.reason == (
        "10 of 20 requests answered in the last 5 s failed, timed out or were refused (50% > 25%)"
    )
