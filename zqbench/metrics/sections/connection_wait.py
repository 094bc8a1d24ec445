"""Sends that waited for a connection the target held: summary.json's `connection_wait`.

An open-loop request is due at its intended time. When every connection the pool may open
(`--max-connections`, 1024 by default) carries a request the target has not answered, the
next send waits for one to free: a FIFO server that holds a thousand requests in its queue
holds a thousand connections. That wait is the target's doing, not the generator's, so it
is each sample's `connection_wait`, outside `schedule_lag` (the generator's own lateness,
which alone makes a run invalid) and inside `latency_corrected` (from the intended time).
The run keeps its SLO verdict, and this section says how long sends waited and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zqbench import summary as model
from zqbench.metrics import quantiles
from zqbench.metrics.false_refusals import peak_in_flight
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.sections.base import sentence

if TYPE_CHECKING:
    from zqbench.metrics.summarize import RunInfo


def connection_wait(frame: MetricFrame, run: RunInfo) -> model.ConnectionWait | None:
    """None unless the wait's p99 passed the schedule-lag limit: a wait that, counted as
    the generator's lag, would have made the run invalid (or the column is absent)."""
    waits = frame.values["connection_wait"]
    limit_s = run.validity.max_schedule_lag_p99_s
    ordered = np.sort(waits[~np.isnan(waits)]) / NS_PER_S
    p99 = quantiles.quantile(ordered, 0.99)
    if p99 is None or p99 <= limit_s:
        return None
    c = frame.columns
    sent = ~c.unsent
    return model.ConnectionWait(
        waited=int(np.count_nonzero(ordered > limit_s)),
        sent=int(np.count_nonzero(sent)),
        limit_s=limit_s,
        p99_s=float(p99),
        max_s=float(ordered[-1]),
        peak_in_flight=peak_in_flight(c.t_send[sent], c.t_end[sent]),
    )


def _seconds(value: float) -> str:
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"


def connection_wait_text(w: model.ConnectionWait) -> str:
    """How long sends waited for a connection, why, and how the verdict treats it."""
    return (
        f"{w.waited:,} of {w.sent:,} sends waited for a free connection longer than the "
        f"schedule-lag limit ({_seconds(w.limit_s)}): connection_wait p99 "
        f"{_seconds(w.p99_s)}, max {_seconds(w.max_s)}. The target held every connection "
        f"zqbench may open ({w.peak_in_flight:,} request{'' if w.peak_in_flight == 1 else 's'}"
        " on the wire at most, "
        "--max-connections) without answering, so the wait is the target's: "
        "latency_corrected counts it, the generator's own schedule_lag does not, and the "
        "run keeps its SLO verdict"
    )


SECTION = sentence("connection_wait", connection_wait_text, connection_wait)
