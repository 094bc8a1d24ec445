"""Each `[stop]` rule's judgement over one window of evidence: pure functions, no clock.

A window holds the completed requests of the stage under watch whose response ended in
the last `window` seconds, and the run's in-flight count as the progress reports saw it.
Each rule returns a `Trip` (what it saw, one sentence) or None.

queue_growth asks for two rises at once, each a one-sided lower confidence bound on an
ordinary least-squares slope above zero: the in-flight count over time, and the wait of
each admitted request over its send time (the server's own server_queue where its timing
headers give it, else TTFT). A queue shows both: requests pile up and each waits longer
than the one before. A zero-queue server's in-flight count rises only while the load
ramps, and its TTFT only by its neighbours' share of a step; `min_rise` (the wait's rise
over the window, lower bound) keeps such stretching from counting, and the confidence
bound keeps noise from counting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from zqbench.stop.config import ErrorRateRule, QueuedShareRule, QueueGrowthRule

MIN_INFLIGHT_POINTS = 4  # in-flight readings in the window before its slope means anything


@dataclass(frozen=True, slots=True)
class Growth:
    """queue_growth's evidence: both slopes with their lower bounds."""

    wait_by: str  # "server_queue" or "ttft"
    wait_slope: float  # seconds of wait per second of send time
    wait_slope_low: float
    wait_rise_low: float  # the lower bound times the sends' span: seconds
    min_rise: float
    inflight_slope: float  # requests per second
    inflight_slope_low: float
    inflight_now: int


@dataclass(frozen=True, slots=True)
class Trip:
    rule: str
    reason: str  # one sentence
    measured: float  # the share, or the wait's rise (s)
    bound: float  # what it passed
    requests: int  # in the window, judged
    growth: Growth | None = None


def t_quantile(confidence: float, dof: int) -> float:
    """Student's t quantile by the Cornish-Fisher expansion (Abramowitz and Stegun 26.7.5):
    within 0.5% of the exact value from 3 degrees of freedom, and numpy has no t table."""
    z = NormalDist().inv_cdf(confidence)
    n = float(max(dof, 1))
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / n + g2 / n**2 + g3 / n**3


def slope_bound(x: np.ndarray, y: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """(slope, its one-sided lower bound) of y over x by least squares; None when fewer
    than 3 points or no spread in x."""
    n = len(x)
    if n < 3:
        return None
    dx = x - x.mean()
    sxx = float(dx @ dx)
    if sxx <= 0:
        return None
    slope = float(dx @ (y - y.mean())) / sxx
    residual = y - y.mean() - slope * dx
    se = math.sqrt(float(residual @ residual) / (n - 2) / sxx)
    return slope, slope - t_quantile(confidence, n - 2) * se


def error_rate(rule: ErrorRateRule, errors: int, answered: int) -> Trip | None:
    if answered < rule.min_requests or answered == 0:
        return None
    share = errors / answered
    if share <= rule.above:
        return None
    what = "failed, timed out or were refused" if rule.count_refusals else "failed or timed out"
    return Trip(
        "error_rate",
        f"{errors} of {answered} requests answered in the last {rule.window_s:g} s {what} "
        f"({share:.0%} > {rule.above:.0%})",
        share,
        rule.above,
        answered,
    )


def queued_share(rule: QueuedShareRule, queued: int, judged: int) -> Trip | None:
    if judged < rule.min_requests or judged == 0:
        return None
    share = queued / judged
    if share <= rule.above:
        return None
    return Trip(
        "queued_share",
        f"{queued} of {judged} admitted requests in the last {rule.window_s:g} s were "
        f"queued ({share:.0%} > {rule.above:.0%})",
        share,
        rule.above,
        judged,
    )


def queue_growth(
    rule: QueueGrowthRule,
    wait_by: str,
    send_s: np.ndarray,
    wait_s: np.ndarray,
    inflight_t_s: np.ndarray,
    inflight: np.ndarray,
    min_rise_s: float,
) -> Trip | None:
    """`send_s`/`wait_s`: the window's admitted requests; `inflight_*`: its readings."""
    if len(send_s) < rule.min_requests or len(inflight) < MIN_INFLIGHT_POINTS:
        return None
    waits = slope_bound(send_s, wait_s, rule.confidence)
    counts = slope_bound(inflight_t_s, inflight.astype(float), rule.confidence)
    if waits is None or counts is None:
        return None
    (w_slope, w_low), (c_slope, c_low) = waits, counts
    rise_low = w_low * float(send_s.max() - send_s.min())
    if w_low <= 0 or c_low <= 0 or rise_low < min_rise_s:
        return None
    growth = Growth(
        wait_by=wait_by,
        wait_slope=w_slope,
        wait_slope_low=w_low,
        wait_rise_low=rise_low,
        min_rise=min_rise_s,
        inflight_slope=c_slope,
        inflight_slope_low=c_low,
        inflight_now=int(inflight[-1]),
    )
    percent = f"{rule.confidence:.0%}"
    return Trip(
        "queue_growth",
        f"a queue is growing: {int(inflight[-1])} requests in flight, rising by "
        f"{c_slope:.1f}/s (at least {c_low:.1f}/s at {percent}), and each admitted "
        f"request's {wait_by} rising by {w_slope * 1e3:.0f} ms/s, at least "
        f"{rise_low * 1e3:.0f} ms over its {len(send_s)} requests "
        f"(> {min_rise_s * 1e3:.0f} ms)",
        rise_low,
        min_rise_s,
        len(send_s),
        growth,
    )
