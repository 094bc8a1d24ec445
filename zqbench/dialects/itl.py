"""Inter-token latency of one response (the gaps between its token events), summarised for
its Sample row."""

from __future__ import annotations

from itertools import pairwise


def summarize_itl(token_times: list[int]) -> tuple[int | None, int | None, int | None]:
    """(mean, p99, max) of the gaps between consecutive token events, in ns.

    p99 is an exact order statistic: the gap at 1-based rank ceil(0.99 * n) of the n sorted
    gaps (integer arithmetic, so no float rounding moves the rank); with fewer than 100 gaps
    it is the maximum. The mean is rounded to the nearest ns. (None, None, None) when there
    are fewer than two events, i.e. no gap at all.
    """
    n = len(token_times) - 1
    if n < 1:
        return None, None, None
    gaps = [b - a for a, b in pairwise(token_times)]
    gaps.sort()
    rank = (99 * n + 99) // 100  # ceil(0.99 * n)
    return round(sum(gaps) / n), gaps[rank - 1], gaps[-1]
