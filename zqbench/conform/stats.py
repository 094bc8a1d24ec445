"""The hidden-queue detector's slope (its Wilson interval is zqbench.metrics.quantiles').

`median_slope(steps)`: a least-squares slope with a bootstrap interval, kept as secondary
evidence (a median hides a queue that holds half the requests or fewer, so it never decides):

    slope = cov(x, m) / var(x), where m_i is the median TTFT at offered concurrency x_i.

The interval resamples the requests of each step with replacement (a seeded private RNG, so
a run is reproducible), recomputes every step's median and the slope, and takes the 2.5%
and 97.5% points of the resampled slopes (percentile bootstrap, 95%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Slope:
    slope: float  # units of y per unit of x
    ci_low: float
    ci_high: float


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slopes of y (..., steps) against x (steps,), vectorised over rows."""
    xc = x - x.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc * xc).sum()


def median_slope(
    steps: Sequence[tuple[float, Sequence[float]]], *, resamples: int = 2000, seed: int = 0
) -> Slope | None:
    """Slope of the per-step median of the samples against x; None with < 2 usable steps."""
    usable = [(float(x), np.asarray(s, dtype=float)) for x, s in steps if len(s) > 0]
    if len({x for x, _ in usable}) < 2:
        return None
    x = np.array([xv for xv, _ in usable])
    medians = np.array([np.median(s) for _, s in usable])
    rng = np.random.default_rng(seed)
    boot = np.empty((resamples, len(usable)))
    for j, (_, s) in enumerate(usable):
        idx = rng.integers(0, len(s), size=(resamples, len(s)))
        boot[:, j] = np.median(s[idx], axis=1)
    slopes = _slope(x, boot)
    low, high = np.percentile(slopes, [2.5, 97.5])
    return Slope(float(_slope(x, medians)), float(low), float(high))
