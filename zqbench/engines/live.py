"""Running counters a worker keeps for the live view; summed across workers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from zqbench.metrics.classify import LIVE_ANSWER, answer_of
from zqbench.samples.live_counts import LiveCounts, LiveCountsSnapshot, merge
from zqbench.samples.sample import Sample

RECENT = 2048  # latencies (and schedule lags) kept for the "so far" percentiles
_SUMMED = ("sent", "due", "done", "ok", "inflight")  # counters that add up across workers

MAX_COMPLETIONS = 20_000  # per snapshot (0.5 s): past 40k req/s the watcher sees a sample
NO_ANSWERS = np.empty(0, dtype=LIVE_ANSWER)


_MAX_NS = float(2**62)  # past any wait, inside int64


def live_answer(s: Sample) -> tuple[int, ...]:
    """What the [stop] watcher needs of one sample: a row of LIVE_ANSWER, in its field order
    (a plain tuple here, on the event loop; the snapshot makes the batch's array)."""
    ttft = hold = queue = -1
    if s.t_first_token is not None:
        ttft = s.t_first_token - s.t_send
        hold = s.t_end - s.t_first_token
    if s.srv_dispatch is not None and s.srv_received is not None:
        # The parsers accept stamps up to 1e11 s: a wait no int64 of ns holds (a target's
        # future stamp once raised OverflowError here and lost every sample) is unknown.
        wait_ns = (s.srv_dispatch - s.srv_received) * 1e9
        if wait_ns < _MAX_NS:
            queue = max(0, int(wait_ns))
    tokens = s.prompt_tokens if s.prompt_tokens is not None else -1
    return (s.stage, s.t_send, s.t_end, ttft, queue, hold, tokens, answer_of(s.status, s.error))


def _keep(ring: list[float], cursor: int, value: float) -> int:
    """Append to a ring of RECENT values; the next cursor."""
    if len(ring) < RECENT:
        ring.append(value)
        return cursor
    ring[cursor] = value
    return (cursor + 1) % RECENT


def _nearest_rank(values: np.ndarray, q: float) -> float:
    return float(values[int(np.ceil(q * len(values))) - 1])


@dataclass(slots=True)
class LiveStats:
    worker: int = 0  # the share's index, so the live view can show each worker apart
    sent: int = 0
    due: int = 0  # open loop: requests whose intended time has passed (the offered load)
    done: int = 0
    ok: int = 0
    inflight: int = 0
    stage: int = 0
    status: Counter[str] = field(default_factory=Counter)
    recent_ms: list[float] = field(default_factory=list)
    recent_lag_ms: list[float] = field(default_factory=list)  # open loop: t_send - t_intended
    _cursor: int = 0
    _lag_cursor: int = 0
    # Kept only when the run serves live metrics (--metrics-port): the samples' counts.
    counts: LiveCounts | None = None
    # Kept only when the scenario has [stop] rules: the answers since the last snapshot.
    completions: list[tuple[int, ...]] | None = None
    completions_seq: int = 0  # snapshots that carried completions, so far

    def complete(self, sample: Sample) -> None:
        if self.completions is not None and len(self.completions) < MAX_COMPLETIONS:
            self.completions.append(live_answer(sample))

    def record(self, status_key: str, ok: bool, latency_ms: float) -> None:
        self.done += 1
        self.status[status_key] += 1
        if ok:
            self.ok += 1
            self._cursor = _keep(self.recent_ms, self._cursor, latency_ms)

    def record_lag(self, lag_ms: float) -> None:
        self._lag_cursor = _keep(self.recent_lag_ms, self._lag_cursor, lag_ms)

    def snapshot(self) -> WorkerProgress:
        counters = {name: getattr(self, name) for name in (*_SUMMED, "stage")}
        lags = np.sort(np.asarray(self.recent_lag_ms))
        batch = NO_ANSWERS
        if self.completions:
            batch = np.array(self.completions, dtype=LIVE_ANSWER)
            self.completions.clear()
            self.completions_seq += 1
        return WorkerProgress(
            **counters,
            status=dict(self.status),
            recent_ms=tuple(self.recent_ms),
            worker=self.worker,
            lag_p99_ms=_nearest_rank(lags, 0.99) if len(lags) else None,
            counts=self.counts.snapshot() if self.counts is not None else None,
            completions=batch,
            completions_seq=self.completions_seq,
        )


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
    worker: int = 0
    lag_p99_ms: float | None = None  # open loop: of its latest sends; None: none yet
    counts: LiveCountsSnapshot | None = None  # with --metrics-port only
    # Under [stop]: answered since the last one, a LIVE_ANSWER array (zqbench.metrics.classify)
    completions: np.ndarray = field(default_factory=lambda: NO_ANSWERS, compare=False)
    completions_seq: int = 0  # this batch's number (the watcher takes each batch once)


@dataclass(frozen=True, slots=True)
class WorkerLine:
    """One worker's own figures in the live view (its rate comes from successive `sent`)."""

    worker: int
    sent: int
    due: int
    inflight: int
    lag_p99_ms: float | None


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
    per_worker: tuple[WorkerLine, ...] = ()  # by worker index
    counts: LiveCountsSnapshot | None = None  # every worker's, summed (--metrics-port only)
    # Under [stop]: each worker's latest batch of completions, (worker, batch number, batch).
    # The same batch arrives again with other workers' later snapshots: take it once.
    completions: tuple[tuple[int, int, np.ndarray], ...] = ()


ProgressCallback = Callable[[Progress], None]
X = TypeVar("X")


def tee(first: Callable[[X], None], then: Callable[[X], None] | None) -> Callable[[X], None]:
    """One callback that calls `first`, then `then` (None: nobody else listens)."""

    def both(value: X) -> None:
        first(value)
        if then is not None:
            then(value)

    return both


def merge_snapshots(snapshots: Sequence[WorkerProgress]) -> Progress:
    """Sum counters across workers; pool recent latencies for the percentiles; keep each
    worker's own counters and lag apart."""
    status: Counter[str] = Counter()
    for snap in snapshots:
        status.update(snap.status)
    recent = np.sort(np.asarray([ms for snap in snapshots for ms in snap.recent_ms]))
    p50 = p99 = None
    if len(recent):
        p50, p99 = _nearest_rank(recent, 0.50), _nearest_rank(recent, 0.99)
    lines = tuple(
        WorkerLine(s.worker, s.sent, s.due, s.inflight, s.lag_p99_ms)
        for s in sorted(snapshots, key=lambda s: s.worker)
    )
    counters = {name: sum(getattr(s, name) for s in snapshots) for name in _SUMMED}
    counted = [s.counts for s in snapshots if s.counts is not None]
    return Progress(
        **counters,
        stage=max((s.stage for s in snapshots), default=0),
        status=dict(status),
        p50_ms=p50,
        p99_ms=p99,
        workers=len(snapshots),
        per_worker=lines,
        counts=merge(counted) if counted else None,
        completions=tuple(
            (s.worker, s.completions_seq, s.completions) for s in snapshots if len(s.completions)
        ),
    )
