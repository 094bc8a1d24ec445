"""The engine loop: one thread that owns the compute backend and runs steps.

Each iteration is a step boundary: take the requests the scheduler admitted,
prefill them (low-latency ones alone and first, long-context ones alone and
last, the rest batched; with a prefill budget, the prompts past it at the next
boundary), then run one decode step for every running sequence.
Events go to the asyncio handlers in one `call_soon_threadsafe` per phase, so
the event loop wakes once per step, not once per token.

Every sequence ends with a terminal event, so its handler always returns: "end",
"reject", "error", or "abort" when its client went away. A backend step that
raises is run again for each of its sequences alone: only the sequence that
fails by itself gets an "error", and the others keep decoding.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from reference_server.backend import ComputeBackend
from reference_server.metrics import Metrics
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence, State, deliver
from reference_server.trace import RequestRange

try:  # NVTX ranges for Nsight; the package is a no-op without a profiler attached.
    import nvtx

    _DOMAIN: Any = nvtx.get_domain("refserver")
except ImportError:  # pragma: no cover - nvtx is an optional extra
    _DOMAIN = None

log = logging.getLogger("reference_server")

Events = list[tuple[Sequence, str, str | None]]


class _Range:
    """`with _Range("decode"):` pushes an NVTX range in domain `refserver` when nvtx exists."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        if _DOMAIN is not None:
            _DOMAIN.push_range(message=self.name)

    def __exit__(self, *exc: object) -> None:
        if _DOMAIN is not None:
            _DOMAIN.pop_range()


def _close_range(seq: Sequence) -> None:
    if seq.range is not None:
        seq.range.close()
        seq.range = None


class Engine:
    def __init__(
        self,
        backend: ComputeBackend,
        scheduler: Scheduler,
        metrics: Metrics,
        loop: asyncio.AbstractEventLoop,
        prefill_budget: int | None = None,
    ) -> None:
        self.backend = backend
        self.scheduler = scheduler
        self.metrics = metrics
        self.loop = loop
        # Prompt tokens prefilled at one step boundary (None: every admitted prompt); the
        # admitted prompts past it wait for the next boundary, in order, holding their slots.
        self.prefill_budget = prefill_budget
        self.running: list[Sequence] = []
        self.pending: list[Sequence] = []  # admitted, their prefill left to a later boundary
        self.dispatch_delays_s: deque[float] = deque(maxlen=100)  # for /health jitter
        self._step_ema_s = {"prefill": 0.0, "decode": 0.0}
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="refserver-engine", daemon=True)

    # ---- control (asyncio side) ---------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop = True
        self.scheduler.wake()
        self._thread.join(timeout)

    def dispatch_jitter_us(self) -> float:
        """Standard deviation of the last 100 dispatch delays (received -> compute start)."""
        d = list(self.dispatch_delays_s)
        return statistics.pstdev(d) * 1e6 if len(d) >= 2 else 0.0

    # ---- engine thread --------------------------------------------------------

    def _post(self, events: Events) -> None:
        if events:
            self.loop.call_soon_threadsafe(deliver, events)

    def _run(self) -> None:
        while not self._stop:
            if not self.running and not self.pending:
                self.scheduler.wait_for_work(0.05)
            with _Range("dispatch"):  # newly admitted requests join this step
                new = self._intake()
            try:
                if new or self.pending:
                    self._prefill_all(new)
                    self._prune()
                if self.running:
                    self._decode(self.running)
                    self._prune()
            except Exception as exc:  # an engine bug must not kill the server
                self._fail_all(new, exc)
            self._update_gauges()
        self._shut_down()

    def _intake(self) -> list[Sequence]:
        """This boundary's sequences to prefill. Reports the fifo queue timeouts, and drops
        every sequence whose client went away (queued, admitted or running) with an
        "abort" event, so that its handler returns."""
        intake = self.scheduler.take_new()
        events: Events = []
        for s in intake.expired:
            s.state = State.REJECTED
            events.append((s, "reject", "queue_timeout"))
        for s in [*intake.abandoned, *intake.new, *self.pending, *self.running]:
            if s.aborted:
                self._finish_slot(s, State.ABORTED)
                events.append((s, "abort", None))
        self._post(events)
        self._prune()
        self.pending = [s for s in self.pending if s.state is State.ADMITTED]
        admitted = [s for s in intake.new if s.state is State.ADMITTED]
        for s in admitted:  # its range spans prefill and every decode step it joins
            s.range = RequestRange(s.trace_id)
        return admitted

    def _shut_down(self) -> None:
        """The loop has stopped: refuse what never started, end what was running."""
        leftover = self.scheduler.drain_waiting()
        for s in leftover:
            s.state = State.REJECTED
        events: Events = [(s, "reject", "shutdown") for s in leftover]
        stopped = [*self.pending, *self.running]
        for s in stopped:
            _close_range(s)
        self._post(events + [(s, "error", "server shut down") for s in stopped])

    def _prune(self) -> None:
        self.running = [s for s in self.running if s.state is State.RUNNING]

    def _finish_slot(self, seq: Sequence, state: State) -> None:
        seq.state = state
        _close_range(seq)
        if seq.slot is not None:
            self.backend.release(seq.slot)
        self.scheduler.release(seq)

    def _prefill_all(self, new: list[Sequence]) -> None:
        # Low-latency requests are prefilled alone and first, whatever the budget, so
        # batching other prompts never stretches their TTFT; long prompts go alone and last.
        groups = [[s] for s in new if s.profile == "low-latency"]
        waiting = self.pending + [s for s in new if s.profile != "low-latency"]
        now, self.pending = self._within_budget(waiting)
        batch = [s for s in now if s.profile == "high-throughput"]
        if batch:
            groups.append(batch)
        groups += [[s] for s in now if s.profile == "long-context"]
        for group in groups:
            self._prefill(group)

    def _within_budget(self, waiting: list[Sequence]) -> tuple[list[Sequence], list[Sequence]]:
        """(prefilled at this boundary, left for the next) in arrival order: prompts while
        their tokens fit the budget, and always the first, so a prompt longer than the
        budget is prefilled alone rather than never. The delay a boundary adds to the
        running sequences is then bounded by the budget's prefill."""
        if self.prefill_budget is None:
            return waiting, []
        now: list[Sequence] = []
        tokens = 0
        for i, s in enumerate(waiting):
            if now and tokens + len(s.prompt) > self.prefill_budget:
                return now, waiting[i:]
            now.append(s)
            tokens += len(s.prompt)
        return now, []

    def _expect(self, phase: str) -> None:
        self.scheduler.step_end_perf = time.perf_counter() + self._step_ema_s[phase]

    def _observe_step(self, phase: str, seconds: float, batch: int) -> None:
        ema = self._step_ema_s[phase]
        self._step_ema_s[phase] = seconds if ema == 0.0 else 0.9 * ema + 0.1 * seconds
        self.metrics.step_time.labels(phase).observe(seconds)
        self.metrics.batch_size.labels(phase).observe(batch)

    def _prefill(self, group: list[Sequence]) -> None:
        now, now_perf = time.time(), time.perf_counter()
        for s in group:
            s.start, s.state = now, State.RUNNING
            delay = now_perf - s.received_perf
            self.dispatch_delays_s.append(delay)
            self.metrics.dispatch_delay.observe(delay)
            self.metrics.queue_time.observe(max(0.0, (s.dispatch or now) - s.received))
            self.metrics.prompt_tokens.inc(len(s.prompt))
            self.metrics.prefill_group.labels(s.profile).observe(len(group))
        # The head of a streaming response goes out now: compute has started.
        self._post([(s, "start", None) for s in group])
        self._prefill_step(group)

    def _prefill_step(self, group: list[Sequence]) -> None:
        """Prefill `group` in one backend step; the sequences that finish join `running`."""
        self._expect("prefill")
        try:
            with _Range("prefill"):
                firsts, timing = self.backend.prefill(
                    [s.slot for s in group],  # type: ignore[misc]  # admitted: have a slot
                    [s.prompt for s in group],
                    [s.params for s in group],
                )
        except Exception as exc:
            for s in group:  # forget what the failed step half did: each retry starts afresh
                self.backend.release(s.slot)  # type: ignore[arg-type]
            self._isolate(group, exc, self._prefill_step)
            return
        done_perf = time.perf_counter()
        self._observe_step("prefill", timing.wall_ms / 1e3, len(group))
        for s in group:
            self._count_cached(s)
        total = sum(len(s.prompt) - s.cached_tokens for s in group)
        events: Events = []
        for s, tok in zip(group, firsts, strict=True):
            self.metrics.ttft.observe(done_perf - s.received_perf)
            if timing.gpu_ms is not None:  # share of the step, by prompt tokens computed
                share = (len(s.prompt) - s.cached_tokens) / total
                s.gpu_ms = (s.gpu_ms or 0.0) + timing.gpu_ms * share
            self.running.append(s)
            self._advance(s, tok, events)
        self._post(events)

    def _count_cached(self, s: Sequence) -> None:
        """Record what the prefix cache gave `s`'s prefill, on `s` and in the counters."""
        cached = self.backend.cached_tokens(s.slot)  # type: ignore[arg-type]  # prefilled
        if cached is None:  # no prefix cache: nothing was looked up
            return
        s.cached_tokens = cached
        self.metrics.prefix_cache_queries.inc(len(s.prompt))
        self.metrics.prefix_cache_hits.inc(cached)

    def _decode(self, batch: list[Sequence]) -> None:
        """One decode step for every sequence of `batch`."""
        self._expect("decode")
        try:
            with _Range("decode"):
                slots: list[int] = [s.slot for s in batch]  # type: ignore[misc]  # running
                nxt, timing = self.backend.decode(slots, [s.last_token for s in batch])
        except Exception as exc:
            # A failed decode step leaves each slot's length as it was, so a retry
            # rewrites the same cache positions (a sampled row may draw again).
            self._isolate(batch, exc, self._decode)
            return
        seconds = timing.wall_ms / 1e3
        self._observe_step("decode", seconds, len(batch))
        events: Events = []
        for s, tok in zip(batch, nxt, strict=True):
            self.metrics.itl.observe(seconds)
            if timing.gpu_ms is not None:
                s.gpu_ms = (s.gpu_ms or 0.0) + timing.gpu_ms / len(batch)
            self._advance(s, tok, events)
        self._post(events)

    def _isolate(
        self, batch: list[Sequence], exc: Exception, step: Callable[[list[Sequence]], None]
    ) -> None:
        """`step(batch)` raised `exc`. One sequence: it fails. Several: each runs the step
        again alone, so only the sequences that cause the failure fail, and the others
        keep decoding."""
        if len(batch) == 1:
            self._fail(batch[0], exc)
            return
        for s in batch:
            step([s])

    def _advance(self, s: Sequence, token: int, events: Events) -> None:
        done, kind, piece = s.append_token(token)
        self.metrics.generation_tokens.inc()
        # One event per token, "" included (text held back: a stop sequence in the making,
        # or a character not complete yet): a streamed OpenAI answer then has a chunk per
        # token, as vLLM's has, and its usage matches what was streamed.
        events.append((s, kind, piece))
        if done:
            self._finish_slot(s, State.FINISHED)
            self.metrics.success.labels(s.stop_reason or "max_tokens").inc()
            self.metrics.e2e.observe(time.perf_counter() - s.received_perf)
            events.append((s, "end", None))

    def _fail(self, seq: Sequence, exc: Exception) -> None:
        log.error("engine failure in %s", seq.request_id, exc_info=exc)
        self._finish_slot(seq, State.REJECTED)
        self._post([(seq, "error", f"engine failure: {type(exc).__name__}: {exc}")])

    def _fail_all(self, new: list[Sequence], exc: Exception) -> None:
        for s in {id(s): s for s in [*new, *self.pending, *self.running]}.values():
            if s.state in (State.ADMITTED, State.RUNNING):
                self._fail(s, exc)
        self.running = []
        self.pending = []

    def _update_gauges(self) -> None:
        sch = self.scheduler
        self.metrics.running.set(sch.num_slots_used)
        self.metrics.waiting.set(sch.num_waiting)
        self.metrics.kv_usage.set(sch.kv_usage)
