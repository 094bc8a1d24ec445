"""The engine loop: one thread that owns the compute backend and runs steps.

Each iteration is a step boundary: take the requests the scheduler admitted,
prefill them (low-latency ones alone and first, long-context ones alone and
last, the rest batched), then run one decode step for every running sequence.
Events go to the asyncio handlers in one `call_soon_threadsafe` per phase, so
the event loop wakes once per step, not once per token.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import deque
from typing import Any

from reference_server.backend import ComputeBackend
from reference_server.metrics import Metrics
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence, State, deliver

try:  # NVTX ranges for Nsight; the package is a no-op without a profiler attached.
    import nvtx

    _DOMAIN: Any = nvtx.get_domain("refserver")
except ImportError:  # pragma: no cover - nvtx is an optional extra
    _DOMAIN = None

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


class Engine:
    def __init__(
        self,
        backend: ComputeBackend,
        scheduler: Scheduler,
        metrics: Metrics,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.backend = backend
        self.scheduler = scheduler
        self.metrics = metrics
        self.loop = loop
        self.running: list[Sequence] = []
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
            if not self.running:
                self.scheduler.wait_for_work(0.05)
            with _Range("dispatch"):  # newly admitted requests join this step
                new, expired = self.scheduler.take_new()
                events: Events = [(s, "reject", "queue_timeout") for s in expired]
                for s in expired:
                    s.state = State.REJECTED
                self._drop_aborted()
                new = [s for s in new if not self._abort_if_gone(s)]
            self._post(events)
            try:
                if new:
                    self._prefill_all(new)
                if self.running:
                    self._decode()
            except Exception as exc:  # a backend failure must not kill the server
                self._fail_all(new, exc)
            self._update_gauges()
        leftover = self.scheduler.drain_waiting()
        for s in leftover:
            s.state = State.REJECTED
        self._post([(s, "reject", "shutdown") for s in leftover])
        self._post([(s, "error", "server shut down") for s in self.running])

    def _abort_if_gone(self, seq: Sequence) -> bool:
        if seq.aborted:
            seq.state = State.ABORTED
            self.scheduler.release(seq)
            return True
        return False

    def _drop_aborted(self) -> None:
        if any(s.aborted for s in self.running):
            for s in self.running:
                if s.aborted:
                    self._finish_slot(s, State.ABORTED)
            self.running = [s for s in self.running if not s.aborted]

    def _finish_slot(self, seq: Sequence, state: State) -> None:
        seq.state = state
        if seq.slot is not None:
            self.backend.release(seq.slot)
        self.scheduler.release(seq)

    def _prefill_all(self, new: list[Sequence]) -> None:
        # Low-latency requests are prefilled alone and first, so batching other
        # prompts never stretches their TTFT; long prompts go alone and last.
        groups = [[s] for s in new if s.profile == "low-latency"]
        batch = [s for s in new if s.profile == "high-throughput"]
        if batch:
            groups.append(batch)
        groups += [[s] for s in new if s.profile == "long-context"]
        for group in groups:
            self._prefill(group)

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
            s.start, s.start_perf, s.state = now, now_perf, State.RUNNING
            delay = now_perf - s.received_perf
            self.dispatch_delays_s.append(delay)
            self.metrics.dispatch_delay.observe(delay)
            self.metrics.queue_time.observe(max(0.0, (s.dispatch or now) - s.received))
            self.metrics.prompt_tokens.inc(len(s.prompt))
            self.metrics.prefill_group.labels(s.profile).observe(len(group))
        # The head of a streaming response goes out now: compute has started.
        self._post([(s, "start", None) for s in group])
        self._expect("prefill")
        with _Range("prefill"):
            slots = [s.slot for s in group]
            firsts, timing = self.backend.prefill(
                slots,  # type: ignore[arg-type]  # admitted sequences always hold a slot
                [s.prompt for s in group],
                [s.params for s in group],
            )
        done_perf = time.perf_counter()
        self._observe_step("prefill", timing.wall_ms / 1e3, len(group))
        total = sum(len(s.prompt) for s in group)
        events: Events = []
        for s, tok in zip(group, firsts, strict=True):
            s.first_token_perf = done_perf
            self.metrics.ttft.observe(done_perf - s.received_perf)
            if timing.gpu_ms is not None:  # share of the step, by prompt tokens
                s.gpu_ms = (s.gpu_ms or 0.0) + timing.gpu_ms * len(s.prompt) / total
            self.running.append(s)
            self._advance(s, tok, events)
        self.running = [s for s in self.running if s.state is State.RUNNING]
        self._post(events)

    def _decode(self) -> None:
        batch = self.running
        self._expect("decode")
        with _Range("decode"):
            slots: list[int] = [s.slot for s in batch]  # type: ignore[misc]  # running: have one
            nxt, timing = self.backend.decode(slots, [s.last_token for s in batch])
        seconds = timing.wall_ms / 1e3
        self._observe_step("decode", seconds, len(batch))
        events: Events = []
        for s, tok in zip(batch, nxt, strict=True):
            self.metrics.itl.observe(seconds)
            if timing.gpu_ms is not None:
                s.gpu_ms = (s.gpu_ms or 0.0) + timing.gpu_ms / len(batch)
            self._advance(s, tok, events)
        self.running = [s for s in batch if s.state is State.RUNNING]
        self._post(events)

    def _advance(self, s: Sequence, token: int, events: Events) -> None:
        done = s.append_token(token)
        self.metrics.generation_tokens.inc()
        text = s.pending_text(final=done)
        if text:
            events.append((s, "text", text))
        if done:
            self._finish_slot(s, State.FINISHED)
            self.metrics.success.labels(s.stop_reason or "max_tokens").inc()
            self.metrics.e2e.observe(time.perf_counter() - s.received_perf)
            events.append((s, "end", None))

    def _fail_all(self, new: list[Sequence], exc: Exception) -> None:
        events: Events = []
        for s in {id(s): s for s in [*new, *self.running]}.values():
            if s.state in (State.FINISHED, State.ABORTED):
                continue
            self._finish_slot(s, State.REJECTED)
            events.append((s, "error", f"engine failure: {type(exc).__name__}: {exc}"))
        self.running = []
        self._post(events)

    def _update_gauges(self) -> None:
        sch = self.scheduler
        self.metrics.running.set(sch.num_slots_used)
        self.metrics.waiting.set(sch.num_waiting)
        self.metrics.kv_usage.set(sch.kv_usage)
