"""Arrival schedules (open loop): known counts and times, statistics of the random processes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zqbench.load import Stage
from zqbench.load.arrival_rate import ArrivalRateLoad
from zqbench.load.arrival_schedule import arrival_times
from zqbench.scenario import load_scenario

S = 1_000_000_000


def ramping(
    stages: list[tuple[float, float]],
    start_rate: float = 0.0,
    arrivals: str = "uniform",
    burstiness: float | None = None,
) -> ArrivalRateLoad:
    st_ = tuple(Stage(d, t, None) for d, t in stages)
    return ArrivalRateLoad(
        executor="ramping-arrival-rate",
        start_rate=start_rate,
        stages=st_,
        arrivals=arrivals,
        burstiness=burstiness,
        duration_s=sum(d for d, _ in stages),
        graceful_stop_s=30.0,
    )


def constant(rate: float, duration_s: float, arrivals: str = "uniform", b: float | None = None):
    return ramping([(duration_s, rate)], start_rate=rate, arrivals=arrivals, burstiness=b)


# --------------------------------------------------------------------------- uniform


def test_constant_rate_spacing_is_exact() -> None:
    """20 req/s for 5 s: arrivals at 50 ms, 100 ms, ..., 5 s (k6: none at t = 0)."""
    s = arrival_times(load_scenario("smoke").load, seed=1)
    assert s.offered == 100
    assert s.times_ns.dtype == np.int64 and s.stage.dtype == np.int32
    np.testing.assert_array_equal(s.times_ns, np.arange(1, 101, dtype=np.int64) * 50_000_000)
    assert s.duration_ns == 5 * S
    assert s.stage_bounds_ns == ((0, 5 * S),)
    assert (s.stage == 0).all()
    np.testing.assert_array_equal(s.request_ids, np.arange(100))


def test_ramp_from_zero_known_times() -> None:
    """0 -> 100 req/s over 30 s: Λ(t) = 5t²/3, so 1500 arrivals, the i-th at √(0.6 i) s."""
    s = arrival_times(ramping([(30.0, 100.0)]), seed=0)
    assert s.offered == 1500
    assert s.expected == pytest.approx(1500.0)
    assert s.times_ns[0] == round(math.sqrt(0.6) * S)  # 774 596 669 ns
    assert s.times_ns[99] == round(math.sqrt(60.0) * S)
    assert s.times_ns[-1] == 30 * S


def test_burst_counts_per_stage() -> None:
    """0->100 over 30 s, ->1000 over 5 s, ->100 over 30 s: 1500 + 2750 + 16500 arrivals."""
    load = load_scenario("burst").load
    s = arrival_times(load, seed=0)
    assert s.expected == 20750.0
    assert s.offered == 20750
    assert np.bincount(s.stage).tolist() == [1500, 2750, 16500]
    assert s.stage_bounds_ns == ((0, 30 * S), (30 * S, 35 * S), (35 * S, 65 * S))
    # The 1500th arrival lands exactly on the boundary and belongs to the stage ending there.
    assert s.times_ns[1499] == 30 * S and s.stage[1499] == 0
    assert s.times_ns[1500] > 30 * S and s.stage[1500] == 1
    assert s.times_ns[4249] == 35 * S and s.stage[4249] == 1
    assert s.times_ns[-1] == 65 * S


def test_burst_scaled() -> None:
    s = arrival_times(load_scenario("burst").scaled(rate_scale=0.1).load, seed=0)
    assert s.offered == 2075
    assert np.bincount(s.stage).tolist() == [150, 275, 1650]


def test_ramp_down_to_zero() -> None:
    """100 -> 0 req/s over 10 s: Λ = 500, the last arrival at 10 s (a double root)."""
    s = arrival_times(ramping([(10.0, 0.0)], start_rate=100.0), seed=0)
    assert s.offered == 500
    assert s.times_ns[0] == round((10 - math.sqrt(100 - 0.2)) * S)
    assert s.times_ns[-1] == 10 * S


def test_zero_rate_stage_gets_no_arrivals() -> None:
    load = ramping([(10.0, 0.0), (10.0, 10.0), (5.0, 0.0)], start_rate=0.0)
    s = arrival_times(load, seed=0)
    assert s.offered == 50 + 25
    assert np.bincount(s.stage, minlength=3).tolist() == [0, 50, 25]
    assert s.times_ns[0] > 10 * S


def test_count_tolerates_float_rounding() -> None:
    """0.3 req/s for 10 s sums to 2.9999999999999996 in floating point; it is 3 arrivals."""
    s = arrival_times(constant(0.3, 10.0), seed=0)
    assert s.offered == 3
    assert s.times_ns[-1] == 10 * S


def test_zero_length_stage_is_a_step() -> None:
    """A 0 s stage jumps the rate: 10 req/s for 1 s, then 100 req/s for 1 s."""
    load = ramping([(1.0, 10.0), (0.0, 100.0), (1.0, 100.0)], start_rate=10.0)
    s = arrival_times(load, seed=0)
    assert s.offered == 110
    assert np.bincount(s.stage, minlength=3).tolist() == [10, 0, 100]
    assert s.stage_bounds_ns[1] == (S, S)


@settings(max_examples=60, deadline=None)
@given(
    start=st.floats(0, 300),
    stages=st.lists(st.tuples(st.floats(0, 20), st.floats(0, 300)), min_size=1, max_size=5),
)
def test_uniform_invariants(start: float, stages: list[tuple[float, float]]) -> None:
    """Count ⌊Λ(T)⌋, times sorted inside the run, each inside its own stage."""
    if sum(d for d, _ in stages) <= 0:
        return
    load = ramping(stages, start_rate=start)
    s = arrival_times(load, seed=0)
    lam = s.expected
    assert s.offered in (math.floor(lam), math.floor(lam * (1 + 1e-9) + 1e-9))
    t = s.times_ns
    assert (np.diff(t) >= 0).all()
    if s.offered:
        assert t[0] > 0 and t[-1] <= s.duration_ns
        lo = np.array([b[0] for b in s.stage_bounds_ns])[s.stage]
        hi = np.array([b[1] for b in s.stage_bounds_ns])[s.stage]
        assert ((t >= lo) & (t <= hi)).all()
        assert (np.diff(s.stage) >= 0).all()


def test_an_hour_at_1000_rps_is_drawn_in_full() -> None:
    """3.6 million arrivals, in order, within the hour (how fast: benchmarks/loadgen.py)."""
    s = arrival_times(constant(1000.0, 3600.0), seed=0)
    assert s.offered == 3_600_000
    assert (np.diff(s.times_ns) >= 0).all() and s.times_ns[-1] <= s.duration_ns


# --------------------------------------------------------------------------- random


def ks_statistic(sample: np.ndarray, cdf) -> float:
    x = np.sort(sample)
    n = len(x)
    f = cdf(x)
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


def test_poisson_count_mean_and_variance() -> None:
    """Over 200 seeds the count of a Poisson process has mean ≈ variance ≈ Λ(T) = 200."""
    load = constant(20.0, 10.0, "poisson")
    counts = np.array([arrival_times(load, seed).offered for seed in range(200)])
    assert abs(counts.mean() - 200) < 5  # standard error 1
    assert 140 < counts.var(ddof=1) < 270  # relative standard error 0.1


def test_poisson_inhomogeneous_count_and_shape() -> None:
    """On a 0->100 ramp the pooled arrival times follow Λ(t)/Λ(T) = (t/30 s)²."""
    load = ramping([(30.0, 100.0)], arrivals="poisson")
    runs = [arrival_times(load, seed) for seed in range(40)]
    counts = np.array([r.offered for r in runs])
    assert abs(counts.mean() - 1500) < 5 * math.sqrt(1500 / 40)
    t = np.concatenate([r.times_ns for r in runs]) / (30 * S)
    assert ks_statistic(t, lambda x: x**2) < 1.95 / math.sqrt(len(t))  # KS at α = 0.001


def test_poisson_gaps_are_exponential() -> None:
    s = arrival_times(constant(100.0, 100.0, "poisson"), seed=7)
    gaps = np.diff(s.times_ns) / S
    assert ks_statistic(gaps, lambda x: 1 - np.exp(-100 * x)) < 1.95 / math.sqrt(len(gaps))
    assert (s.times_ns > 0).all() and (s.times_ns <= s.duration_ns).all()


def test_poisson_not_uniform_gaps() -> None:
    """A test that would pass for evenly spaced arrivals must fail here."""
    gaps = np.diff(arrival_times(constant(100.0, 100.0, "poisson"), seed=7).times_ns)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)


def test_gamma_burstiness_one_is_poisson() -> None:
    p = arrival_times(constant(50.0, 20.0, "poisson"), seed=3)
    g = arrival_times(constant(50.0, 20.0, "gamma", 1.0), seed=3)
    np.testing.assert_array_equal(p.times_ns, g.times_ns)


@pytest.mark.parametrize(("shape", "cv"), [(0.25, 2.0), (0.5, math.sqrt(2)), (4.0, 0.5)])
def test_gamma_gap_cv(shape: float, cv: float) -> None:
    """Gap CV is 1/√burstiness: burstier below 1, smoother above; the mean rate holds."""
    s = arrival_times(constant(100.0, 200.0, "gamma", shape), seed=11)
    gaps = np.diff(s.times_ns) / S
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(cv, rel=0.1)
    assert s.offered == pytest.approx(20000, rel=0.05)


def test_seeds_reproduce_and_differ() -> None:
    load = load_scenario("burst").with_overrides(arrivals="gamma", burstiness=0.5).load
    a, b, c = (arrival_times(load, seed) for seed in (5, 5, 6))
    np.testing.assert_array_equal(a.times_ns, b.times_ns)
    np.testing.assert_array_equal(a.stage, b.stage)
    assert not np.array_equal(a.times_ns[:100], c.times_ns[:100])


def test_uses_no_global_rng() -> None:
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    arrival_times(constant(10.0, 10.0, "poisson"), seed=1)
    assert np.random.random() == before


def test_random_stage_indices_match_bounds() -> None:
    s = arrival_times(load_scenario("burst").with_overrides(arrivals="poisson").load, seed=2)
    bounds = np.array([b[1] for b in s.stage_bounds_ns])
    np.testing.assert_array_equal(s.stage, np.searchsorted(bounds, s.times_ns, side="left"))


# --------------------------------------------------------------------------- split


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_split_partitions_the_schedule(workers: int) -> None:
    whole = arrival_times(load_scenario("burst").with_overrides(arrivals="poisson").load, 4)
    parts = whole.split(workers)
    assert [p.worker for p in parts] == list(range(workers))
    assert all(p.n_workers == workers for p in parts)
    sizes = [p.offered for p in parts]
    assert sum(sizes) == whole.offered and max(sizes) - min(sizes) <= 1
    ids = np.concatenate([p.request_ids for p in parts])
    order = np.argsort(ids)
    np.testing.assert_array_equal(ids[order], whole.request_ids)
    np.testing.assert_array_equal(
        np.concatenate([p.times_ns for p in parts])[order], whole.times_ns
    )
    np.testing.assert_array_equal(np.concatenate([p.stage for p in parts])[order], whole.stage)
    for p in parts:
        assert (np.diff(p.times_ns) >= 0).all()
        assert p.duration_ns == whole.duration_ns and p.stage_bounds_ns == whole.stage_bounds_ns
        np.testing.assert_array_equal(p.request_ids % workers, p.worker)


def test_split_rejects_bad_counts() -> None:
    s = arrival_times(load_scenario("smoke").load, 0)
    with pytest.raises(ValueError):
        s.split(0)
    with pytest.raises(ValueError):
        s.split(2)[0].split(2)


def test_schedule_arrays_are_read_only() -> None:
    s = arrival_times(load_scenario("smoke").load, 0)
    with pytest.raises(ValueError):
        s.times_ns[0] = 0


def test_replace_keeps_dataclass_frozen() -> None:
    s = arrival_times(load_scenario("smoke").load, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.duration_ns = 1  # type: ignore[misc]
