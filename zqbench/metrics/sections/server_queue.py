"""summary.json's `server_queue`: the server's own account of its queue, from its /metrics
during the run (zqbench.telemetry.server_queue measures it), or why the run has none."""

from __future__ import annotations

import math

from zqbench import summary as model
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, Fact, count, ms, number
from zqbench.printable import shown


def queue_metrics(q: model.ServerQueue) -> tuple[str, ...]:
    """The engine's names of the quantities shown."""
    parts = (q.waiting, q.running, q.queue_time, q.rejections)
    return tuple(p.metric for p in parts if p is not None and not isinstance(p, model.Unavailable))


def _gauge_text(g: model.GaugeSummary | model.Unavailable) -> str:
    if isinstance(g, model.Unavailable):
        return f"unavailable: {g.unavailable}"
    return f"max {g.max:g}, mean {g.mean:.3g}"


def at_most(bound: model.JsonFloat, largest: float | None) -> str:
    """A histogram percentile, the upper bound of its bucket: "≤ 300", or "> 120000" past
    the largest finite bound (ms)."""
    v = number(bound)
    if v is None:
        return NO_VALUE
    if math.isinf(v):
        return NO_VALUE if largest is None else f"> {ms(largest)}"
    return f"≤ {ms(v)}"


def _queue_time_text(t: model.QueueTime | model.Unavailable) -> str:
    """Percentiles (bucket bounds) and the exact mean in ms, and how many requests the
    histogram counted."""
    if isinstance(t, model.Unavailable):
        return f"unavailable: {t.unavailable}"
    p50, p90, p99 = (at_most(v, t.largest_bound) for v in (t.p50, t.p90, t.p99))
    return (
        f"p50 {p50} ms, p90 {p90} ms, p99 {p99} ms (bucket bounds), mean {ms(t.mean)} ms"
        f" ({count(t.count)} requests)"
    )


def _rejections_text(r: model.Rejections) -> str:
    """The server's count of its refusals, and by reason when it gives more than one."""
    # A counter's value is a float in the exposition; refusals are whole.
    # A reason is the label's value, the target's text: escaped and cut (zqbench.printable).
    reasons = [
        f"{shown(reason) or 'no reason'} {count(round(n))}"
        for reason, n in r.by_reason.items()
        if n
    ]
    return f"{count(round(r.total))}" + (f" ({', '.join(reasons)})" if reasons else "")


def rows(q: model.ServerQueue) -> list[Fact]:
    """The section's rows, as the terminal shows them too, with the server's own count of
    its refusals where it keeps one zqbench reads: fewer than the run's refusals means
    something in front of it (a proxy, a second front end) refused the rest."""
    facts = [
        Fact("requests waiting", _gauge_text(q.waiting)),
        Fact("requests running", _gauge_text(q.running)),
        Fact("queue time", _queue_time_text(q.queue_time)),
    ]
    if isinstance(q.rejections, model.Rejections):
        facts.append(Fact("refused, by its own count", _rejections_text(q.rejections)))
    return facts


def lines(summary: model.Summary) -> list[str]:
    """A heading naming the source, then waiting, running and the queue time."""
    queue = summary.server_queue
    if not isinstance(queue, model.ServerQueue):
        return []
    # Where the figures come from: "from vLLM's /metrics (vllm:num_requests_waiting, ...)".
    return [
        f"server queue from {queue.engine_name}'s /metrics ({', '.join(queue_metrics(queue))}):",
        *(f"  {f.label}: {f.value}" for f in rows(queue)),
    ]


SECTION = Section(
    "server_queue",
    "body",
    # The model itself (or why there is none) and its plot: waiting and running over time.
    view=lambda s, plot: None if s.server_queue is None else (s.server_queue, plot),
    lines=lines,
    compute=lambda frame, run: run.server_queue,
    figure="server_queue",
    filters={"queue_metrics": queue_metrics, "queue_rows": rows},
)
