"""Each `[stop]` rule's judgement over one window of evidence: pure functions, no clock.

A `Window` holds the completed requests of the stage under watch whose response ended in
the last `window` seconds, each classified by the outcome kernel (zqbench.metrics.classify),
and the run's in-flight count as the progress reports saw it. Each rule type's `judge`
(zqbench.stop.config) reads it through one of the functions here, which return a `Trip`
(what it saw, one sentence) or None.

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
from typing import TYPE_CHECKING, Literal

import numpy as np

from zqbench.metrics.classify import (
    FAILED,
    INTERRUPTED,
    QUEUED,
    REFUSED_OUTCOMES,
    SERVED,
    TIMED_OUT,
    UNDETERMINED,
)
from zqbench.summary import StopGrowth

if TYPE_CHECKING:
    from zqbench.stop.config import ErrorRateRule, QueuedShareRule, QueueGrowthRule

WaitBy = Literal["server_queue", "ttft"]
MIN_INFLIGHT_POINTS = 4  # in-flight readings in the window before its slope means anything


@dataclass(frozen=True, slots=True)
class Trip:
    rule: str
    reason: str  # one sentence
    measured: float  # the share, or the wait's rise (s)
    bound: float  # what it passed
    requests: int  # in the window, judged
    growth: StopGrowth | None = None  # queue_growth's evidence, as summary.json records it


@dataclass(frozen=True)
class Window:
    """One rule's window: its answers (one value per answer, in one order) and the run's
    in-flight readings within it."""

    outcome: np.ndarray  # the kernel's class (zqbench.metrics.classify.OUTCOMES index)
    send_s: np.ndarray  # t_send
    ttft_s: np.ndarray  # NaN: none
    server_queue_s: np.ndarray  # NaN: no timing headers
    inflight_t_s: np.ndarray
    inflight: np.ndarray
    allowance_s: float | None  # the outcome allowance; None: no outcome basis, nothing judged

    def errors(self, count_refusals: bool) -> tuple[int, int]:
        """(failed or timed out, answered): an interrupted request was not answered."""
        # A refusal in disguise is a refusal here too, never a failure.
        bad = (FAILED, TIMED_OUT, *(REFUSED_OUTCOMES if count_refusals else ()))
        answered = self.outcome != INTERRUPTED
        return int(np.count_nonzero(np.isin(self.outcome, bad))), int(np.count_nonzero(answered))

    def queued(self) -> tuple[int, int]:
        """(queued, judged) among the admitted; none judged without an outcome basis."""
        if self.allowance_s is None:
            return 0, 0
        judged = (self.outcome == SERVED) | (self.outcome == QUEUED)
        return int(np.count_nonzero(self.outcome == QUEUED)), int(np.count_nonzero(judged))

    def waits(self) -> tuple[WaitBy, np.ndarray, np.ndarray]:
        """(wait_by, send_s, wait_s) of the admitted answers: one scale, never both, the
        server's own wait where most answers carry it."""
        ok = np.isin(self.outcome, (SERVED, QUEUED, UNDETERMINED))
        queue, ttft, send = self.server_queue_s[ok], self.ttft_s[ok], self.send_s[ok]
        by_header = ~np.isnan(queue)
        if np.count_nonzero(by_header) * 2 >= max(1, len(queue)):
            return "server_queue", send[by_header], queue[by_header]
        by_ttft = ~np.isnan(ttft)
        return "ttft", send[by_ttft], ttft[by_ttft]


EXACT_T_DOF = 30  # below this Student's t is computed exactly; above, the expansion


def t_quantile(confidence: float, dof: int) -> float:
    """Student's t quantile (confidence > 0.5). Exact below EXACT_T_DOF degrees of freedom:
    the closed-form CDF for a whole number of them (Abramowitz and Stegun 26.7.3-4),
    inverted by bisection; from EXACT_T_DOF on, the Cornish-Fisher expansion (26.7.5),
    within 1e-4 there. numpy has no t distribution, and this is all the rules need of one."""
    n = max(dof, 1)
    if n >= EXACT_T_DOF:
        z = NormalDist().inv_cdf(confidence)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        return z + g1 / n + g2 / n**2 + g3 / n**3
    lo, hi = 0.0, 1.0
    while t_cdf(hi, n) < confidence:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, n) < confidence else (lo, mid)
    return (lo + hi) / 2


def t_cdf(t: float, dof: int) -> float:
    """P(T <= t) for Student's t with a whole number of degrees of freedom, t >= 0."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    if dof % 2:  # odd: 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 0.0
        if dof > 1:
            total = 1.0
            for k in range(1, (dof - 1) // 2):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
        inside = theta + math.sin(theta) * math.cos(theta) * total
        two_sided = 2 / math.pi * inside
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term = total = 1.0
        for k in range(1, dof // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        two_sided = math.sin(theta) * total
    return (1 + two_sided) / 2


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


def share_trip(rule: ErrorRateRule | QueuedShareRule, hits: int, n: int, what: str) -> Trip | None:
    """The share rules' trip: hits / n past `above`, with at least `min_requests` judged;
    `what` the n requests were, and what the hits did."""
    if n < rule.min_requests or n == 0:
        return None
    share = hits / n
    if share <= rule.above:
        return None
    reason = f"{hits} of {n} {what} ({_share(share, rule.above)} > {rule.above:.0%})"
    return Trip(rule.NAME, reason, share, rule.above, n)


def _share(share: float, bound: float) -> str:
    """Whole percent, or one decimal where whole percent would read as the bound itself."""
    whole = f"{share:.0%}"
    return f"{share:.1%}" if whole == f"{bound:.0%}" else whole


def queue_growth(
    rule: QueueGrowthRule,
    wait_by: WaitBy,
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
    growth = StopGrowth(
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
