"""Each SLO's value so far, estimated from the live counts, and whether it holds so far.

The verdict of a run is summary.json's (exact order statistics, confidence intervals); this
is a running estimate for a dashboard:

    rate (errors, status_<code>)    exact: the counted share of every request so far
    pNN of a histogram's metric     read from the buckets, linear within one (as PromQL's
                                    histogram_quantile), over every stage and class
    pNN/pNN                         per class from its buckets, the worst class (as the gate)
    mean                            the histogram's sum over its count

Other SLOs (min, max, the metrics without a live histogram, the scalars) have no live
estimate: `estimate` returns None and the exposition leaves them out.
"""

from __future__ import annotations

import operator

from zqbench.metrics.slo import Slo
from zqbench.samples.live_counts import (
    HISTOGRAMS,
    KNOWN_STATUSES,
    N_BINS,
    LiveCountsSnapshot,
    bucket_quantile,
)

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _bins(snap: LiveCountsSnapshot, metric: str, cls: str | None = None) -> list[int]:
    total = [0] * N_BINS
    for (name, _stage, c), h in snap.histograms.items():
        if name == metric and (cls is None or c == cls):
            for i, n in enumerate(h.bins):
                total[i] += n
    return total


def _rate(slo: Slo, snap: LiveCountsSnapshot) -> float | None:
    n = snap.total()
    if n == 0:
        return None
    if slo.metric == "errors":
        return sum(k for (_, _, _, answer), k in snap.requests.items() if answer != "ok") / n
    code = int(slo.metric.removeprefix("status_"))
    if code != 0 and code not in KNOWN_STATUSES:
        return None  # folded into its class ("4xx") in the counts: no exact share
    label = str(code)
    return sum(k for (_, _, status, _), k in snap.requests.items() if status == label) / n


def estimate(slo: Slo, snap: LiveCountsSnapshot) -> float | None:
    """The SLO's metric so far, in its base unit (seconds, a fraction, a ratio); None when
    it has no live estimate or no request has given it a value yet."""
    if slo.agg == "rate":
        return _rate(slo, snap)
    if slo.metric not in HISTOGRAMS:
        return None
    if slo.agg == "mean":
        hs = [h for (name, _, _), h in snap.histograms.items() if name == slo.metric]
        count = sum(sum(h.bins) for h in hs)
        return sum(h.sum_s for h in hs) / count if count else None
    if slo.q is not None:
        return bucket_quantile(_bins(snap, slo.metric), slo.q)
    if slo.ratio is not None:
        top_q, bottom_q = slo.ratio
        classes = sorted({c for (name, _, c) in snap.histograms if name == slo.metric})
        worst: float | None = None
        for cls in classes:
            bins = _bins(snap, slo.metric, cls)
            top, bottom = bucket_quantile(bins, top_q), bucket_quantile(bins, bottom_q)
            if top is not None and bottom:
                worst = top / bottom if worst is None else max(worst, top / bottom)
        return worst
    return None


def holds(slo: Slo, value: float) -> bool:
    return bool(_OPS[slo.op](value, slo.threshold))
