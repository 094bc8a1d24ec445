"""Open-loop schedules: absolute intended send times for the arrival-rate executors.

The rate curve λ(t) is piecewise linear: it starts at `start_rate` and each stage ramps
linearly to its `target` over its duration (k6 ramping-arrival-rate semantics; a
constant-arrival-rate scenario is one flat stage). Λ(t) = ∫₀ᵗ λ is the expected number of
arrivals by time t. Every process below draws points y₁ < y₂ < ... in "Λ-space" and maps
them back to time with Λ⁻¹, which is exact and closed-form per stage (a quadratic):

- uniform: yᵢ = i. The i-th arrival (i = 1, 2, ...) is at the time Λ reaches i, so the
  count of arrivals by time t is ⌊Λ(t)⌋, as in k6. There is no arrival at t = 0; at a
  constant rate r the first is at 1/r and the last at exactly T when rT is whole.
- poisson: unit-mean exponential gaps in Λ-space: an inhomogeneous Poisson process with
  intensity λ(t).
- gamma: gamma gaps in Λ-space with shape = burstiness and mean 1 (vLLM `--burstiness`,
  AIPerf `--arrival-smoothness`): burstiness 1 is Poisson, < 1 burstier (gap CV = 1/√shape),
  > 1 smoother. At a constant rate this is exactly vLLM's gamma(shape, 1/(rate·shape)).

Random processes keep every point with y ≤ Λ(T); the count varies with the seed around Λ(T).
An arrival exactly on a stage boundary belongs to the stage that ends there: stage k holds
the arrivals with tₖ < t ≤ tₖ₊₁ (the first stage also holds t = 0). A stage whose rate is 0
throughout gets no arrivals.

Randomness comes only from `numpy.random.default_rng(seed)`, private to the call.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from zqbench.load.arrival_rate import ArrivalRateLoad

_NS = 1_000_000_000
# Λ(T) is a float sum; a rate curve meant to give exactly N arrivals can land a hair under N
# (0.3 req/s x 10 s = 2.9999999999999996). Counts tolerate this relative error.
_COUNT_EPS = 1e-9


@dataclass(frozen=True, slots=True, eq=False)
class ArrivalSchedule:
    """Intended send times of one run, or of one worker's share of it.

    `times_ns[i]` (int64, ns from the run's start, non-decreasing) is when request
    `request_ids[i]` should be sent; `stage[i]` (int32) indexes `LoadConfig.stages`.
    Request ids number the whole run's arrivals 0..N-1 in time order, so they stay global
    after `split`.
    """

    times_ns: np.ndarray
    stage: np.ndarray
    request_ids: np.ndarray
    duration_ns: int
    stage_bounds_ns: tuple[tuple[int, int], ...]  # (start, end) of each stage
    expected: float  # Λ(T): the expected arrivals of the whole run
    worker: int = 0
    n_workers: int = 1

    @property
    def offered(self) -> int:
        """The number of arrivals in this schedule."""
        return int(self.times_ns.shape[0])

    def split(self, n_workers: int) -> list[ArrivalSchedule]:
        """Deal the arrivals round-robin to `n_workers` workers (arrival i to worker i mod W).

        Interleaving gives every worker the same rate curve at 1/W of the rate, so each
        worker's own pacing error stays small; the parts partition the schedule.
        """
        if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers must be a whole number >= 1, got {n_workers!r}")
        if self.n_workers != 1:
            raise ValueError("split() a whole schedule, not a worker's part")
        return [
            dataclasses.replace(
                self,
                times_ns=_readonly(self.times_ns[w::n_workers].copy()),
                stage=_readonly(self.stage[w::n_workers].copy()),
                request_ids=_readonly(self.request_ids[w::n_workers].copy()),
                worker=w,
                n_workers=n_workers,
            )
            for w in range(n_workers)
        ]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True)
class _Curve:
    """The piecewise-linear rate curve, one segment per stage (times in seconds)."""

    bounds_ns: np.ndarray  # int64, K+1 stage boundaries
    r0: np.ndarray  # rate at each segment's start (req/s)
    slope: np.ndarray  # d rate / dt within each segment (req/s²)
    dur_s: np.ndarray  # segment lengths
    cum: np.ndarray  # Λ at each boundary, K+1 values, cum[0] = 0


def _curve(load: ArrivalRateLoad) -> _Curve:
    # Boundaries are whole nanoseconds, and every later computation uses these same
    # durations, so times and stage bounds agree exactly.
    dur_ns = np.array([round(s.duration_s * _NS) for s in load.stages], dtype=np.int64)
    bounds = np.concatenate(([0], np.cumsum(dur_ns))).astype(np.int64)
    dur_s = dur_ns / _NS
    targets = np.array([s.target for s in load.stages], dtype=np.float64)
    start = float(load.start_rate or 0.0)
    r0 = np.concatenate(([start], targets[:-1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(dur_s > 0, (targets - r0) / dur_s, 0.0)
    mass = 0.5 * (r0 + targets) * dur_s
    cum = np.concatenate(([0.0], np.cumsum(mass)))
    return _Curve(bounds, r0, slope, dur_s, cum)


def _invert(curve: _Curve, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times (ns) when Λ reaches each y (sorted, 0 < y ≤ Λ(T)), and their stage indexes."""
    k_last = len(curve.r0) - 1
    # The first boundary with cum ≥ y closes the segment holding y; zero-mass segments
    # (rate 0 throughout, or 0 s long) are skipped, and y on a boundary lands at the end of
    # the segment that reaches it (the earliest time Λ = y).
    k = np.searchsorted(curve.cum, y, side="left") - 1
    k = np.clip(k, 0, k_last)
    u = np.clip(y - curve.cum[k], 0.0, None)
    r0 = curve.r0[k]
    a = curve.slope[k]
    # Solve r0·τ + a·τ²/2 = u for τ ≥ 0. The form 2u / (r0 + √(r0² + 2au)) is the stable
    # root: it needs no division by a (flat segments) and no cancellation when r0 ≫ a·τ;
    # with r0 = 0 it gives √(2u/a). The discriminant can go a hair negative by rounding
    # at the end of a ramp down to 0.
    disc = np.clip(r0 * r0 + 2.0 * a * u, 0.0, None)
    denom = r0 + np.sqrt(disc)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(denom > 0, 2.0 * u / denom, 0.0)
    tau = np.minimum(tau, curve.dur_s[k])
    t = curve.bounds_ns[k] + np.rint(tau * _NS).astype(np.int64)
    t = np.minimum(t, curve.bounds_ns[k + 1])
    # Rounding to whole ns can only tie neighbours, never reorder them, but make it certain.
    t = np.maximum.accumulate(t) if t.size else t
    return t.astype(np.int64), k.astype(np.int32)


def _lambda_points(total: float, arrivals: str, burstiness: float | None, seed: int) -> np.ndarray:
    if arrivals == "uniform":
        n = int(np.floor(total * (1.0 + _COUNT_EPS) + _COUNT_EPS))
        # y = n may exceed a total that fell a hair short; clamp so it maps to T.
        return np.minimum(np.arange(1, n + 1, dtype=np.float64), total)
    if arrivals == "poisson":
        shape = 1.0
    elif arrivals == "gamma":
        if burstiness is None or not burstiness > 0:
            raise ValueError(f"gamma arrivals need burstiness > 0, got {burstiness!r}")
        shape = float(burstiness)
    else:
        raise ValueError(f"unknown arrivals {arrivals!r}")
    if total <= 0:
        return np.empty(0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    # Draw enough gaps in one go for all but astronomically unlucky seeds (the count's
    # standard deviation is about √(Λ/shape)), then top up in chunks if needed.
    chunk = int(total + 10.0 * np.sqrt(total / shape) + 100)
    parts: list[np.ndarray] = []
    last = 0.0
    while last <= total:
        gaps = rng.gamma(shape, 1.0 / shape, size=chunk)
        y = last + np.cumsum(gaps)
        parts.append(y)
        last = float(y[-1])
        chunk = max(100, chunk // 4)
    y = np.concatenate(parts)
    return y[: np.searchsorted(y, total, side="right")]


def arrival_times(load: ArrivalRateLoad, seed: int) -> ArrivalSchedule:
    """The run's intended send times for an arrival-rate executor (see the module docstring)."""
    curve = _curve(load)
    total = float(curve.cum[-1])
    y = _lambda_points(total, load.arrivals or "uniform", load.burstiness, seed)
    times, stage = _invert(curve, y)
    bounds = tuple(
        (int(curve.bounds_ns[i]), int(curve.bounds_ns[i + 1])) for i in range(len(load.stages))
    )
    return ArrivalSchedule(
        times_ns=_readonly(times),
        stage=_readonly(stage),
        request_ids=_readonly(np.arange(times.shape[0], dtype=np.int64)),
        duration_ns=int(curve.bounds_ns[-1]),
        stage_bounds_ns=bounds,
        expected=total,
    )
