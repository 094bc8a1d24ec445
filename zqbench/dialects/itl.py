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

    A large response has many gaps (100,000 for a 20 MB stream of one-token chunks): sorting
    them in Python would hold the event loop for tens of milliseconds at the response's end,
    so from `NUMPY_FROM` gaps on the selection runs in numpy (an `array("q")` is read in
    place).
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
    p99 = int(np.partition(values, rank - 1)[rank - 1])
    return round(int(values.sum()) / n), p99, int(values.max())
