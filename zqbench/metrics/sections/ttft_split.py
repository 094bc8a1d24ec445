"""summary.json's `ttft_split`: where the time to first token went.

    head         ttfb = t_headers - t_send: until the response head
    after head   ttft - ttfb = t_first_token - t_headers: from the head to the first token

over the successful requests that recorded both. A server that queues a request before it
answers shows the wait in the first part; one that sends `200 OK` at once and queues the
request behind it shows the wait in the second, where a client's connect timeout cannot
see it. `after_head_share` is that second part's share of the requests' summed TTFT.
"""

from __future__ import annotations

import numpy as np

from zqbench.metrics import quantiles
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import ms
from zqbench.summary import Summary, TtftSplit, json_number


def ttft_split(frame: MetricFrame) -> TtftSplit | None:
    """None when no request has both a head and a first token."""
    ttfb, ttft = frame.values["ttfb"], frame.values["ttft"]
    both = ~np.isnan(ttfb) & ~np.isnan(ttft)
    if not np.any(both):
        return None
    head = np.sort(ttfb[both]) / NS_PER_S
    after = np.sort(ttft[both] - ttfb[both]) / NS_PER_S
    total = float(np.sum(ttft[both]))
    return TtftSplit(
        requests=int(np.count_nonzero(both)),
        head_p50=json_number(quantiles.quantile(head, 0.5)),
        head_p99=json_number(quantiles.quantile(head, 0.99)),
        after_head_p50=json_number(quantiles.quantile(after, 0.5)),
        after_head_p99=json_number(quantiles.quantile(after, 0.99)),
        after_head_share=float(np.sum(ttft[both] - ttfb[both])) / total if total > 0 else 0.0,
    )


def lines(summary: Summary) -> list[str]:
    t = summary.ttft_split
    if t is None:
        return []
    return [
        f"TTFT split: head p50 {ms(t.head_p50)} ms (p99 {ms(t.head_p99)}), then first token"
        f" p50 {ms(t.after_head_p50)} ms (p99 {ms(t.after_head_p99)});"
        f" {t.after_head_share:.1%} of TTFT after the head"
    ]


SECTION = Section(
    "ttft_split",
    "body",
    lines=lines,
    compute=lambda frame, run: ttft_split(frame),
)
