"""summary.json's `distributed`: the workers of a --distributed run (zqbench.distributed
measures them), as the Workers table shows them."""

from __future__ import annotations

from dataclasses import dataclass

from zqbench import summary as model
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, count, ms, share


@dataclass(frozen=True)
class WorkerRow:
    """One worker of a --distributed run: what it sent and the master received, its clock
    against the master's, its own schedule lag, how it ended and what of it never came."""

    worker: str  # "1 (host-b)"
    sent: str
    recorded: str  # samples the master received from it
    clock: str  # "+12.3 µs ± 4.0 µs": the master's clock minus the worker's
    lag_p99: str  # ms
    state: str  # done | stopped | lost
    missing: str  # the slice it did not send, in words; "" when none


@dataclass(frozen=True)
class Workers:
    """The workers of a --distributed run (summary.json's `distributed`)."""

    master: str
    lost: str  # "none", or the requests and share lost with their workers
    rows: tuple[WorkerRow, ...]


def _clock_time(ns: int) -> str:
    """A clock offset or its uncertainty: µs below 1 ms, ms below 1 s, else s (the monotonic
    clocks of two machines differ by about their uptimes)."""
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.6f} s"


def _clock(w: model.DistributedWorker) -> str:
    if w.clock_offset_ns is None:
        return NO_VALUE  # it never measured it (lost before the load)
    sign = "+" if w.clock_offset_ns >= 0 else "-"
    offset = sign + _clock_time(abs(w.clock_offset_ns))
    if w.clock_uncertainty_ns is None:
        return offset
    return f"{offset} ± {_clock_time(w.clock_uncertainty_ns)}"


def _worker_row(w: model.DistributedWorker) -> WorkerRow:
    return WorkerRow(
        worker=f"{w.index} ({w.host})",
        sent=NO_VALUE if w.requests_sent is None else count(w.requests_sent),
        recorded=count(w.samples_received),
        clock=_clock(w),
        lag_p99=ms(w.schedule_lag_p99_s),
        state=w.state,
        missing=w.missing or "",
    )


def view_of(d: model.Distributed | None) -> Workers | None:
    if d is None:
        return None
    lost = "none"
    if d.lost_requests or d.lost_share:
        lost = (
            f"{count(d.lost_requests)} requests ({share(d.lost_share)} of the run;"
            f" allowed {share(d.max_lost_share)})"
        )
    return Workers(master=d.master, lost=lost, rows=tuple(_worker_row(w) for w in d.workers))


# Set on the summary by the run that had workers (zqbench.distributed.outcome).
SECTION = Section("distributed", "body", view=lambda s, _: view_of(s.distributed))
