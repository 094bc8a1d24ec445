"""The native asyncio engine: one worker's share of the load, measured honestly.

Open loop: intended send times are absolute (precomputed from a seeded RNG). The
dispatcher sleeps until shortly before each one and then yields in a tight loop
for the last stretch, because the event loop's timers only resolve to 1 ms. A
request that goes out late keeps its intended time, so `latency_corrected`
charges the lateness to the run (coordinated omission), and `schedule_lag` shows
whether the generator held the schedule.

Closed loop: virtual users each loop request -> think time, their number following
the scenario's VU plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from zqbench.dialects import get_dialect
from zqbench.dialects.base import Dialect, DialectConfig, RequestSpec, ResponseSummary
from zqbench.engines.live import LiveStats, WorkerProgress
from zqbench.load.closed_loop import VuPlan
from zqbench.load.mix import ClassPicker
from zqbench.samples.sample import Sample
from zqbench.samples.writer import SampleRecorder, stream_path
from zqbench.scenario import RequestClass
from zqbench.transport.base import Cancelled, Exchange, HttpRequest, PoolLimits, Transport
from zqbench.transport.factory import make_transport

now_ns = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes

YIELD_EVERY = 32  # when behind schedule, still let responses be read between sends


@dataclass(frozen=True, slots=True)
class ClassSpec:
    """One entry of the request mix, with its prompt already synthesised."""

    name: str
    prompt: str
    max_tokens: int
    prompt_tokens_estimate: int


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Everything a worker needs; picklable, so it can cross into a spawned process."""

    worker: int
    n_workers: int
    base_url: str
    http2: bool
    limits: PoolLimits
    api: str
    dialect_config: DialectConfig
    classes: tuple[ClassSpec, ...]
    stream: bool
    timeout_s: float
    out_dir: str
    spin_ns: int = 1_500_000
    flush_interval_s: float = 0.5
    insecure: bool = False
    h1_client: str = "raw"  # zqbench.transport.factory.H1_CLIENTS
    drain_timeout_s: float | None = None  # None: wait up to timeout_s for in-flight requests
    cold_connections: bool = False  # the scenario's: a new connection for every request


@dataclass(frozen=True, slots=True)
class OpenLoopWork:
    request_ids: np.ndarray  # int64, global ids
    times_ns: np.ndarray  # int64, intended send time relative to the run start
    stages: np.ndarray  # int32
    classes: np.ndarray  # int32, index into WorkerSpec.classes


@dataclass(frozen=True, slots=True)
class ClosedLoopWork:
    """VUs follow the plan; worker w runs the global VU indices i with i % n_workers == w."""

    plan: VuPlan
    mix: tuple[RequestClass, ...]
    seed: int
    poll_ns: int = 10_000_000


@dataclass(slots=True)
class WorkerControl:
    """How the outside world talks to a running worker."""

    should_stop: Callable[[], bool] = lambda: False
    on_progress: Callable[[WorkerProgress], None] | None = None
    progress_interval_s: float = 0.5
    stopped_early: bool = False
    stats: LiveStats = field(default_factory=LiveStats)
    # Each batch of samples once it is on disk (zqbench.distributed ships it to the master).
    on_batch: Callable[[pa.RecordBatch], None] | None = None


def _unique_prompt(base: str, request_id: int) -> str:
    """Same byte length as `base`, different first bytes, so no server caches a prefix."""
    tag = f"{request_id:010d} "
    if len(base) <= len(tag):
        return base
    return tag + base[len(tag) :]


class NativeWorker:
    def __init__(self, spec: WorkerSpec, start_ns: int, control: WorkerControl) -> None:
        self.spec = spec
        self.start_ns = start_ns
        self.control = control
        self.dialect: Dialect = get_dialect(spec.api, spec.dialect_config)
        self.transport: Transport = make_transport(
            spec.base_url,
            http2=spec.http2,
            limits=spec.limits,
            insecure=spec.insecure,
            h1_client=spec.h1_client,
        )
        self.recorder = SampleRecorder(
            stream_path(Path(spec.out_dir), spec.worker),
            flush_interval_s=spec.flush_interval_s,
            on_batch=control.on_batch,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._intended: np.ndarray | None = None  # open loop: for the offered-load counter
        control.stats.worker = spec.worker

    # ------------------------------------------------------------------ one request
    async def _request(
        self, request_id: int, t_intended_abs: int | None, stage: int, class_index: int
    ) -> None:
        cls = self.spec.classes[class_index]
        rspec = RequestSpec(
            request_class=cls.name,
            prompt=_unique_prompt(cls.prompt, request_id),
            max_tokens=cls.max_tokens,
            stream=self.spec.stream,
            prompt_tokens_estimate=cls.prompt_tokens_estimate,
        )
        request = self.dialect.build(rspec)
        # A per-request id lets a server's logs and ground truth be joined to the sample.
        extra = [("x-request-id", f"zq-{request_id}")]
        if self.spec.cold_connections:
            # The connection ends with its response, so the next request pays a new connect.
            extra.append(("connection", "close"))
        request = HttpRequest(
            request.method, request.path, (*request.headers, *extra), request.body
        )
        parser = self.dialect.parser(rspec)
        stats = self.control.stats
        stats.sent += 1
        stats.inflight += 1
        exchange = Exchange()
        try:
            await self.transport.send(request, parser, self.spec.timeout_s, exchange)
        except asyncio.CancelledError:
            # Abandoned at the run's end (graceful stop over, or Ctrl-C): keep what it had,
            # its true send time included; it ends now, as interrupted.
            exchange.t_end = now_ns()
            exchange.error = Cancelled("interrupted")
            if not exchange.t_send:
                exchange.t_send = exchange.t_end  # cancelled before a connection was in hand
        finally:
            stats.inflight -= 1
        if t_intended_abs is not None and exchange.t_send:
            stats.record_lag((exchange.t_send - t_intended_abs) / 1e6)
        self._record(request_id, t_intended_abs, stage, cls, exchange, parser.summary)

    def _record(
        self,
        request_id: int,
        t_intended_abs: int | None,
        stage: int,
        cls: ClassSpec,
        exchange: Exchange,
        summary: ResponseSummary,
    ) -> None:
        start = self.start_ns
        error: str | None
        error = exchange.error.error_class if exchange.error is not None else summary.error
        itl_mean, itl_p99, itl_max = summary.itl()
        t_send = exchange.t_send or now_ns()
        t_end = exchange.t_end or now_ns()
        output_tokens = summary.output_tokens
        sample = Sample(
            request_id=request_id,
            worker=self.spec.worker,
            stage=stage,
            request_class=cls.name,
            t_intended=None if t_intended_abs is None else t_intended_abs - start,
            t_send=t_send - start,
            t_headers=None if summary.t_headers is None else summary.t_headers - start,
            t_first_token=None if summary.t_first_token is None else summary.t_first_token - start,
            t_last_token=None if summary.t_last_token is None else summary.t_last_token - start,
            t_end=t_end - start,
            status=summary.status,
            error=error,
            prompt_tokens=summary.prompt_tokens
            if summary.prompt_tokens is not None
            else cls.prompt_tokens_estimate,
            output_tokens=output_tokens,
            tokens_from_usage=summary.tokens_from_usage,
            itl_mean_ns=itl_mean,
            itl_p99_ns=itl_p99,
            itl_max_ns=itl_max,
            n_chunks=summary.token_events,
            srv_received=summary.srv_received,
            srv_dispatch=summary.srv_dispatch,
            srv_start=summary.srv_start,
            srv_gpu_ms=summary.srv_gpu_ms,
            http_version=exchange.http_version,
            bytes_in=exchange.bytes_in,
            retry_after_s=summary.retry_after_s,
        )
        self.recorder.add(sample)
        key = str(summary.status) if error is None or summary.status else f"transport:{error}"
        self.control.stats.record(key, error is None, (t_end - t_send) / 1e6)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ open loop
    async def _sleep_until(self, due_abs: int) -> bool:
        """Sleep, then spin for the last `spin_ns`; False if asked to stop meanwhile."""
        spin = self.spec.spin_ns
        while True:
            if self.control.should_stop():
                return False
            delta = due_abs - now_ns()
            if delta <= 0:
                return True
            if delta > spin:
                # Wake at most every 100 ms so a stop request is noticed promptly.
                await asyncio.sleep(min(delta - spin, 100_000_000) / 1e9)
            else:
                await asyncio.sleep(0)

    async def run_open(self, work: OpenLoopWork) -> None:
        start = self.start_ns
        self._intended = work.times_ns
        times = work.times_ns.tolist()
        ids = work.request_ids.tolist()
        stages = work.stages.tolist()
        classes = work.classes.tolist()
        burst = 0
        for i, t in enumerate(times):
            due = start + t
            if due > now_ns():
                burst = 0
                if not await self._sleep_until(due):
                    self.control.stopped_early = True
                    return
            else:
                burst += 1
                if burst % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                if self.control.should_stop():
                    self.control.stopped_early = True
                    return
            self.control.stats.stage = stages[i]
            self._spawn(self._request(ids[i], due, stages[i], classes[i]))

    # ------------------------------------------------------------------ closed loop
    async def _vu(self, vu: int, work: ClosedLoopWork, running: dict[int, bool]) -> None:
        picker = ClassPicker(work.mix, work.seed, vu)
        plan = work.plan
        seq = 0
        try:
            while running.get(vu, False) and not self.control.should_stop():
                t = now_ns() - self.start_ns
                if t >= plan.duration_ns:
                    break
                class_index = picker.next_index()
                # Unique global id: VU-major, so ids never collide across workers and VUs.
                request_id = (vu << 32) | seq
                seq += 1
                stage = plan.stage_at(t)
                self.control.stats.stage = stage
                await self._request(request_id, None, stage, class_index)
                if plan.think_time_ns:
                    await asyncio.sleep(plan.think_time_ns / 1e9)
        finally:
            running.pop(vu, None)

    async def run_closed(self, work: ClosedLoopWork) -> None:
        running: dict[int, bool] = {}
        w, n = self.spec.worker, self.spec.n_workers
        while True:
            t = now_ns() - self.start_ns
            if t >= work.plan.duration_ns or self.control.should_stop():
                self.control.stopped_early = t < work.plan.duration_ns
                break
            target = work.plan.target_at(t)
            mine = range(w, target, n)
            wanted = set(mine)
            for vu in wanted:
                if vu not in running:
                    running[vu] = True
                    self._spawn(self._vu(vu, work, running))
            for vu in list(running):
                if vu not in wanted:
                    running[vu] = False  # finishes its current request, then stops
            await asyncio.sleep(work.poll_ns / 1e9)
        for vu in list(running):
            running[vu] = False

    # ------------------------------------------------------------------ lifecycle
    async def _housekeeping(self) -> None:
        interval = self.control.progress_interval_s
        last_progress = 0.0
        while True:
            await asyncio.sleep(min(self.spec.flush_interval_s, interval) / 2)
            self.recorder.maybe_flush()
            now = time.monotonic()
            if self.control.on_progress is not None and now - last_progress >= interval:
                last_progress = now
                if self._intended is not None:
                    elapsed = now_ns() - self.start_ns
                    self.control.stats.due = int(np.searchsorted(self._intended, elapsed, "right"))
                self.control.on_progress(self.control.stats.snapshot())

    async def _drain(self) -> None:
        """Wait for in-flight requests; after a stop request, give them a short grace only."""
        if not self._tasks:
            return
        if self.control.stopped_early:
            grace = 1.0
        elif self.spec.drain_timeout_s is not None:
            grace = self.spec.drain_timeout_s
        else:
            grace = self.spec.timeout_s + 1.0
        deadline = time.monotonic() + grace
        while self._tasks and time.monotonic() < deadline:
            if self.control.should_stop() and not self.control.stopped_early:
                self.control.stopped_early = True
                deadline = min(deadline, time.monotonic() + 1.0)
            await asyncio.wait(set(self._tasks), timeout=0.1)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)

    async def run(self, work: OpenLoopWork | ClosedLoopWork) -> LiveStats:
        housekeeping = asyncio.get_running_loop().create_task(self._housekeeping())
        try:
            await self._sleep_until(self.start_ns)  # t = 0 of every t_* column
            if isinstance(work, OpenLoopWork):
                await self.run_open(work)
            else:
                await self.run_closed(work)
            await self._drain()
        finally:
            housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await housekeeping
            self.recorder.close()
            await self.transport.close()
            if self.control.on_progress is not None:
                self.control.on_progress(self.control.stats.snapshot())
        return self.control.stats


async def open_worker(spec: WorkerSpec, control: WorkerControl) -> NativeWorker:
    """Create a worker and open its connection pool (raises ConnectError when unreachable).

    The start time is set afterwards, so pool warm-up is never charged to the schedule."""
    worker = NativeWorker(spec, start_ns=0, control=control)
    try:
        await worker.transport.open()
    except BaseException:
        worker.recorder.close()
        await worker.transport.close()
        raise
    return worker


def run_async(coro: Any) -> Any:
    """Run a coroutine on uvloop when it is installed (it halves the loop's overhead)."""
    try:
        import uvloop
    except ImportError:  # Windows, or a platform without wheels: asyncio's loop still works
        return asyncio.run(coro)
    return uvloop.run(coro)
