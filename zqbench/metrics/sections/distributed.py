"""summary.json's `distributed`: the workers of a --distributed run (zqbench.distributed
measures them), as the Workers table shows them."""

from __future__ import annotations

from zqbench import summary as model
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, count, share


def _clock_time(ns: int) -> str:
    """A clock offset or its uncertainty: µs below 1 ms, ms below 1 s, else s (the monotonic
    clocks of two machines differ by about their uptimes)."""
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.6f} s"


def clock(w: model.DistributedWorker) -> str:
    """The master's clock minus the worker's, ± its uncertainty: "+12.3 µs ± 4.0 µs"."""
    if w.clock_offset_ns is None:
        return NO_VALUE  # it never measured it (lost before the load)
    sign = "+" if w.clock_offset_ns >= 0 else "-"
    offset = sign + _clock_time(abs(w.clock_offset_ns))
    if w.clock_uncertainty_ns is None:
        return offset
    return f"{offset} ± {_clock_time(w.clock_uncertainty_ns)}"


def lost(d: model.Distributed) -> str:
    """ "none", or the requests and share lost with their workers."""
    if not (d.lost_requests or d.lost_share):
        return "none"
    return (
        f"{count(d.lost_requests)} requests ({share(d.lost_share)} of the run;"
        f" allowed {share(d.max_lost_share)})"
    )


# Set on the summary by the run that had workers (zqbench.distributed.outcome).
SECTION = Section(
    "distributed",
    "body",
    filters={"worker_clock": clock, "workers_lost": lost},
)
