"""Running counters a worker keeps for the live view; summed across workers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

RECENT = 2048  # latencies kept for the "so far" percentiles
_SUMMED = ("sent", "due", "done", "ok", "inflight")  # counters that add up across workers


@dataclass(slots=True)
class LiveStats:
    sent: int = 0
    due: int = 0  # open loop: requests whose intended time has passed (the offered load)
    done: int = 0
    ok: int = 0
    inflight: int = 0
    stage: int = 0
    status: Counter[str] = field(default_factory=Counter)
    recent_ms: list[float] = field(default_factory=list)
    _cursor: int = 0

    def record(self, status_key: str, ok: bool, latency_ms: float) -> None:
        self.done += 1
        self.status[status_key] += 1
        if ok:
            self.ok += 1
            if len(self.recent_ms) < RECENT:
                self.recent_ms.append(latency_ms)
            else:
                self.recent_ms[self._cursor] = latency_ms
                self._cursor = (self._cursor + 1) % RECENT

    def snapshot(self) -> WorkerProgress:
        counters = {name: getattr(self, name) for name in (*_SUMMED, "stage")}
        return WorkerProgress(**counters, status=dict(self.status), recent_ms=tuple(self.recent_ms))


@dataclass(frozen=True, slots=True)
class WorkerProgress:
    """One worker's counters at one moment (picklable: it crosses process boundaries)."""

    sent: int
    due: int  # open loop: requests whose intended time has passed (the offered load)
    done: int
    ok: int
    inflight: int
    stage: int
    status: dict[str, int]
    recent_ms: tuple[float, ...]  # latencies of the latest successful requests


@dataclass(frozen=True, slots=True)
class Progress:
    """The run's counters so far, summed across workers, for the live view."""

    sent: int = 0
    due: int = 0
    done: int = 0
    ok: int = 0
    inflight: int = 0
    stage: int = 0
    status: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None  # of the pooled recent latencies
    p99_ms: float | None = None
    workers: int = 0


ProgressCallback = Callable[[Progress], None]


def merge_snapshots(snapshots: Sequence[WorkerProgress]) -> Progress:
    """Sum counters across workers; pool recent latencies for the percentiles."""
    status: Counter[str] = Counter()
    for snap in snapshots:
        status.update(snap.status)
    recent = np.sort(np.asarray([ms for snap in snapshots for ms in snap.recent_ms]))
    p50 = p99 = None
    if len(recent):
        p50 = float(recent[int(np.ceil(0.50 * len(recent))) - 1])
        p99 = float(recent[int(np.ceil(0.99 * len(recent))) - 1])
    counters = {name: sum(getattr(s, name) for s in snapshots) for name in _SUMMED}
    return Progress(
        **counters,
        stage=max((s.stage for s in snapshots), default=0),
        status=dict(status),
        p50_ms=p50,
        p99_ms=p99,
        workers=len(snapshots),
    )
