"""Admission: who gets a sequence slot, and when. Two policies over one engine.

zero-queue: an arriving request reserves a free slot (and its KV positions)
synchronously, under the lock, in the handler that read it. That reservation is
the dispatch: the request joins the running batch at the next step boundary.
With no slot or KV budget free it is refused at once; nothing ever waits.

fifo: the classic design. A request that finds a free slot and nobody waiting
takes it at once, as in zero-queue; any other joins an unbounded FIFO queue, and
at each step boundary the engine moves requests from the head of the queue into
free slots. The two differ only in what happens without a free slot. An optional
queue timeout turns long waits into a refusal (429).

Both share `take_new` and `release`, so the engine loop is identical for both.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import NamedTuple

from reference_server.sequence import Sequence, State

ZERO_QUEUE = "zero-queue"
FIFO = "fifo"


class Intake(NamedTuple):
    """What the engine takes at a step boundary."""

    new: list[Sequence]  # hold a slot: to prefill now (unless their client left meanwhile)
    expired: list[Sequence]  # fifo: waited longer than the queue timeout
    abandoned: list[Sequence]  # fifo: their client left while they were queued


class Scheduler:
    def __init__(
        self,
        kind: str,
        max_slots: int,
        kv_budget_tokens: int,
        queue_timeout_s: float | None = None,
        dispatch_latency_target_us: float | None = None,
    ) -> None:
        if kind not in (ZERO_QUEUE, FIFO):
            raise ValueError(f"unknown scheduler {kind!r}; expected zero-queue or fifo")
        self.kind = kind
        self.max_slots = max_slots
        self.kv_budget_tokens = kv_budget_tokens
        self.queue_timeout_s = queue_timeout_s
        self.dispatch_latency_target_s = (
            dispatch_latency_target_us / 1e6 if dispatch_latency_target_us else None
        )
        self._lock = threading.Lock()
        self._work = threading.Event()
        self._free = list(range(max_slots - 1, -1, -1))
        self._reserved_tokens = 0
        self._admitted: deque[Sequence] = deque()  # hold slots, not yet computed
        self._waiting: deque[Sequence] = deque()  # fifo queue
        self._waiting_first: deque[Sequence] = deque()  # fifo, low-latency profile
        self._aborts_queued = False  # a queued request was abandoned: purge the queues
        self.draining = False
        # Written by the engine thread before each step: when it expects the step to end.
        self.step_end_perf = 0.0

    # ---- asyncio side -------------------------------------------------------

    def submit(self, seq: Sequence) -> str | None:
        """Admit or queue `seq`; returns None when accepted, else why it was refused."""
        with self._lock:
            if self.draining:
                return "draining"
            if seq.reserved_tokens > self.kv_budget_tokens:
                return "kv_budget"
            if self.kind == ZERO_QUEUE:
                if not self._free:
                    return "no_slot"
                if self._reserved_tokens + seq.reserved_tokens > self.kv_budget_tokens:
                    return "kv_budget"
                target = self.dispatch_latency_target_s
                if target is not None and self.step_end_perf - time.perf_counter() > target:
                    return "dispatch_target"
                self._assign(seq)
                self._admitted.append(seq)
            elif self._can_take_now(seq):
                self._assign(seq)
                self._admitted.append(seq)
            elif seq.profile == "low-latency":
                self._waiting_first.append(seq)
            else:
                self._waiting.append(seq)
        self._work.set()
        return None

    def _can_take_now(self, seq: Sequence) -> bool:
        """fifo: nobody waits ahead and a slot and its KV positions are free. The request then
        takes its slot in the handler, as zero-queue does: a wait in this design is only ever
        a wait behind other requests, never a wake-up of the engine thread (which a busy core
        delays by milliseconds, and which would show as server_queue at rest)."""
        return (
            not self._waiting
            and not self._waiting_first
            and bool(self._free)
            and self._reserved_tokens + seq.reserved_tokens <= self.kv_budget_tokens
        )

    def _assign(self, seq: Sequence) -> None:
        seq.slot = self._free.pop()
        self._reserved_tokens += seq.reserved_tokens
        seq.dispatch = time.time()
        seq.state = State.ADMITTED

    def wake(self) -> None:
        self._work.set()

    def abort(self, seq: Sequence) -> None:
        """The client of `seq` went away. Wherever it is (queued, admitted or running), the
        engine drops it at the next step boundary, frees what it holds and posts "abort"."""
        seq.aborted = True
        with self._lock:
            self._aborts_queued = True
        self._work.set()

    # ---- engine thread ------------------------------------------------------

    def wait_for_work(self, timeout: float) -> None:
        self._work.wait(timeout)
        self._work.clear()

    def take_new(self) -> Intake:
        """At a step boundary: the admitted requests, and the fifo requests that left the
        queue without a slot (timed out, or abandoned by their client)."""
        expired: list[Sequence] = []
        abandoned: list[Sequence] = []
        with self._lock:
            if self.kind == FIFO:
                queues = (self._waiting_first, self._waiting)
                if self._aborts_queued:
                    for q in queues:
                        abandoned += _remove_aborted(q)
                if self.queue_timeout_s is not None:
                    oldest_ok = time.perf_counter() - self.queue_timeout_s
                    for q in queues:
                        # Each deque is in arrival order, so expired requests are at its head.
                        while q and q[0].received_perf < oldest_ok:
                            expired.append(q.popleft())
                for q in queues:
                    while q and self._free:
                        head = q[0]
                        if self._reserved_tokens + head.reserved_tokens > self.kv_budget_tokens:
                            break  # head-of-line blocking: FIFO keeps its order
                        q.popleft()
                        self._assign(head)
                        self._admitted.append(head)
            self._aborts_queued = False
            new = list(self._admitted)
            self._admitted.clear()
        return Intake(new, expired, abandoned)

    def release(self, seq: Sequence) -> None:
        """Give back a slot and its KV reservation (finished, aborted or failed)."""
        if seq.slot is None:
            return
        with self._lock:
            self._free.append(seq.slot)
            self._reserved_tokens -= seq.reserved_tokens
        seq.slot = None
        self._work.set()

    def drain_waiting(self) -> list[Sequence]:
        """On shutdown: every request not yet computing (queued, or admitted and not yet
        taken), to be refused; the admitted ones give their slots back."""
        with self._lock:
            out = [*self._waiting_first, *self._waiting, *self._admitted]
            self._waiting_first.clear()
            self._waiting.clear()
            self._admitted.clear()
        for s in out:
            self.release(s)  # a no-op for the queued ones, which hold no slot
        return out

    # ---- observation --------------------------------------------------------

    @property
    def num_waiting(self) -> int:
        return len(self._waiting) + len(self._waiting_first)

    @property
    def num_slots_used(self) -> int:
        return self.max_slots - len(self._free)

    @property
    def kv_usage(self) -> float:
        return self._reserved_tokens / self.kv_budget_tokens if self.kv_budget_tokens else 0.0


def _remove_aborted(queue: deque[Sequence]) -> list[Sequence]:
    """Take the abandoned requests out of `queue`, keeping the others in order."""
    kept: list[Sequence] = []
    gone: list[Sequence] = []
    for s in queue:  # one pass: `aborted` may turn True meanwhile (asyncio thread)
        (gone if s.aborted else kept).append(s)
    if gone:
        queue.clear()
        queue.extend(kept)
    return gone
