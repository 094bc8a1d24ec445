"""Inter-token latency of one response (the gaps between its token events), summarised for
its Sample row."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

NUMPY_FROM = 1024  # gaps; from this many on, numpy selects the p99 in one C pass


def summarize_itl(token_times: list[int]) -> tuple[int | None, int | None, int | None]:
    """(mean, p99, max) of the gaps between consecutive token events, in ns
    (`summarize_gaps` of those gaps)."""
    return summarize_gaps([b - a for a, b in pairwise(token_times)])


def summarize_gaps(gaps: Sequence[int]) -> tuple[int | None, int | None, int | None]:
    """(mean, p99, max) of the gaps between consecutive token events, in ns.

    p99 is an exact order statistic: the gap at 1-based rank ceil(0.99 * n) of the n sorted
    gaps (integer arithmetic, so no float rounding moves the rank); with fewer than 100 gaps
    it is the maximum. The mean is rounded to the nearest ns. (None, None, None) when there
    are no gaps (fewer than two events).

    A large response has many gaps (150,000 for a 20 MB stream of one-token chunks): sorting
    them in Python holds the event loop for 20-30 ms at the response's end, so from
    `NUMPY_FROM` gaps on numpy selects the p99 (an `array("q")` is read in place). Gaps of 0
    (events read together) are counted, not selected among: numpy's selection slows down
    twentyfold on a mass of equal values.
    """
    n = len(gaps)
    if n < 1:
        return None, None, None
    rank = (99 * n + 99) // 100  # ceil(0.99 * n)
    if n < NUMPY_FROM:
        ordered = sorted(gaps)
        return round(sum(ordered) / n), ordered[rank - 1], ordered[-1]
    import numpy as np

    values = np.asarray(gaps, dtype=np.int64)
    others = values[values != 0]
    zeros = n - len(others)
    below = int((others < 0).sum())  # none when the times never go back
    i = rank - 1  # in the sorted gaps: the negative ones, then the zeros, then the rest
    if below <= i < below + zeros:
        p99 = 0
    else:
        j = i if i < below else i - zeros
        p99 = int(np.partition(others, j)[j])
    return round(int(values.sum()) / n), p99, int(values.max())
