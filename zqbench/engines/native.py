"""The native asyncio engine: one worker's share of the load, measured honestly.

The engine knows no kind of load: it runs its `Work`'s loop (`zqbench.load`), offering it
the `Driver` methods (sleep to an absolute time, send one slot's request, spawn), and asks
the request source (`zqbench.sources`) what each slot's request is. Every request becomes
one `Sample` on disk, its intended time (when the work had one) beside its true send time,
so lateness is charged to the run and `schedule_lag` shows whether the generator held.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from zqbench.dialects import get_dialect
from zqbench.dialects.base import (
    Dialect,
    DialectConfig,
    RequestSpec,
    ResponseSummary,
)
from zqbench.engines.follow_up import FollowUps, FollowUpSpec
from zqbench.engines.live import LiveStats, WorkerProgress
from zqbench.engines.loop_lag import LoopLag, lag_path
from zqbench.load import Slot, Work
from zqbench.samples.live_counts import LiveCounts
from zqbench.samples.sample import Sample
from zqbench.samples.writer import SampleRecorder, stream_path
from zqbench.sources import Requests, RequestSource
from zqbench.stop.ended import EndedAt
from zqbench.transport.base import Cancelled, Exchange, HttpRequest, PoolLimits, Transport
from zqbench.transport.factory import make_transport

now_ns = time.perf_counter_ns  # CLOCK_MONOTONIC on Linux: comparable across processes


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
    source: RequestSource  # what each request asks
    timeout_s: float
    out_dir: str
    spin_ns: int = 1_500_000
    flush_interval_s: float = 0.5
    insecure: bool = False
    h1_client: str = "raw"  # zqbench.transport.factory.H1_CLIENTS
    drain_timeout_s: float | None = None  # None: wait up to timeout_s for in-flight requests
    cold_connections: bool = False  # the scenario's: a new connection for every request
    live_counts: bool = False  # count samples for the live exposition (--metrics-port)
    # Refusals followed at their Retry-After ([outcomes] retry_after_follow_ups); None: off
    follow_ups: FollowUpSpec | None = None
    watched: bool = False  # the scenario has [stop] rules: report every answer (live_answer)
    # Sends at most (its share of the rows a run's analysis holds): a closed loop has no
    # plan to count beforehand, so it stops here (#44); None: no bound
    max_sends: int | None = None


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
    # When [stop] rules ended each stage and the run (zqbench.stop.ended); None: no rules.
    ended: EndedAt | None = None


_INT64 = (-(2**63), 2**63 - 1)
SKIP_PAUSE_S = 0.05  # a virtual user of a stage a [stop] rule ended idles this long a turn
OUT_OF_RANGE = "out_of_range"  # the error class of a sample whose number no column holds
# The sends still waiting at the run's end are recorded this many rows to a flush: recorded
# all at once, the 994,000 left by a 100,000 req/s load on a target that never answered
# were all in the recorder's buffer, and one flush of them held the event loop for seconds.
RECORD_BATCH = 8192
# What a parser that never read a byte says: the response of a send the end cut before it
# was written (read only; a parser built for each was a fifth of their recording's time).
NO_RESPONSE = ResponseSummary()
# Requests at once on an HTTP/2 connection before further sends wait as records: the
# concurrent streams RFC 9113 recommends a server allow at least (its SETTINGS may allow
# more; --max-connections raises the whole).
H2_STREAMS = 100
# How long the cut sends get to record their rows, each time one of them does (5 s without
# any: a send that ignores its cancel must not hold the run's end forever).
CUT_WAIT_S = 5.0
HOUSEKEEPING_S = 0.05  # the longest the flush and progress checks sleep


class Waiting:
    """Open-loop sends due while every connection is taken, oldest first: four int64s each
    (request id, stage, due, since) in one array, 32 bytes a send. As a tuple of a Slot and
    three ints a send took 244 bytes, and a target that answers nothing keeps every later
    send of the run here (#44): a whole schedule may wait."""

    __slots__ = ("_head", "_items")

    def __init__(self) -> None:
        self._items = array("q")
        self._head = 0  # the oldest send's index; the ones before it have left

    def __len__(self) -> int:
        return (len(self._items) - self._head) // 4

    def push(self, slot: Slot, due_abs: int, since: int) -> None:
        self._items.extend((slot.request_id, slot.stage, due_abs, since))

    def pop(self) -> tuple[Slot, int, int]:
        """The oldest send: its slot, when it was due and when it began to wait."""
        items, head = self._items, self._head
        request_id, stage, due, since = items[head : head + 4]
        head += 4
        if head >= 1 << 16 and head * 2 >= len(items):
            del items[:head]  # the space of the sends that left, once it is half the array
            head = 0
        self._head = head
        return Slot(request_id, stage), due, since


def _fits(value: int | None) -> bool:
    return value is None or _INT64[0] <= value <= _INT64[1]


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
        self._cut = False  # the drain is over: nothing more is sent
        # HTTP/1.1 takes a connection per request: once every one the pool may open is taken,
        # a due open-loop send waits here as a record (Waiting), not as a task with its
        # request and parser built. A FIFO target that held all 1,024 connections left
        # ~19,500 waiting tasks, 517,000 objects whose GC passes paused the generator for up to
        # 3.5 s (docs/performance.md). HTTP/2 carries H2_STREAMS a connection before its
        # sends wait here too: as tasks in the transport, a target that answered nothing held
        # every later send of the run, its request built (#44).
        streams = H2_STREAMS if spec.http2 else 1
        self._free_sends = spec.limits.max_connections * streams
        self._waiting = Waiting()
        self._follow_up_tasks: set[asyncio.Task[None]] = set()
        self.follow_ups: FollowUps | None = None
        if spec.follow_ups is not None and spec.follow_ups.budget > 0:
            self.follow_ups = FollowUps(
                spec.follow_ups, spec.worker, Path(spec.out_dir), spec.timeout_s, now_ns
            )
        self._work: Work | None = None
        self._requests: Requests = spec.source.open()
        control.stats.worker = spec.worker
        if spec.live_counts:
            control.stats.counts = LiveCounts()
        if spec.watched:
            control.stats.completions = []

    # ------------------------------------------------------------------ the Driver
    def should_stop(self) -> bool:
        bound = self.spec.max_sends
        return self.control.should_stop() or (
            bound is not None and self.control.stats.sent >= bound
        )

    def stop_early(self) -> None:
        self.control.stopped_early = True

    async def send(
        self,
        slot: Slot,
        t_intended_abs: int | None,
        *,
        waiting_since: int = 0,
        planned: bool = False,
    ) -> None:
        """One slot's request, from the source's spec to its sample on disk. `waiting_since`:
        when it began to wait for a connection (0: it did not); `planned`: an arrival the
        schedule planned, which keeps its row whatever happens."""
        if self._cut:
            self._cut_before_send(slot, t_intended_abs, waiting_since, planned)
            return
        waited = now_ns() - waiting_since if waiting_since else 0
        if self._stage_ended(slot.stage, t_intended_abs):
            if t_intended_abs is None:
                await asyncio.sleep(SKIP_PAUSE_S)  # a user's loop must not spin meanwhile
            return
        request_id = slot.request_id
        self.control.stats.stage = slot.stage
        rspec = self._requests.request(slot)
        request = self.dialect.build(rspec)
        # A per-request id lets a server's logs and ground truth be joined to the sample.
        extra = [*rspec.headers, ("x-request-id", f"zq-{request_id}")]
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
        exchange.connection_wait = waited
        cut = False
        try:
            await self.transport.send(request, parser, self.spec.timeout_s, exchange)
        except asyncio.CancelledError:
            # Abandoned at the run's end (graceful stop over, or Ctrl-C): keep what it had,
            # its true send time included; it ends now, as interrupted.
            exchange.t_end = now_ns()
            exchange.error = Cancelled("interrupted")
            if not exchange.t_send:
                exchange.t_send = exchange.t_end  # cancelled before a connection was in hand
            cut = True
        finally:
            stats.inflight -= 1
        if t_intended_abs is not None and exchange.t_send:
            # The generator's own lag, as schedule_lag: the wait for a connection is the target's.
            own = exchange.t_send - t_intended_abs - exchange.connection_wait
            stats.record_lag(own / 1e6)
        self._record(slot, t_intended_abs, rspec, exchange, parser.summary)
        if cut:
            # The cancellation goes on to the caller once the row is kept: a loop that sends
            # again after an answer (a session's next turn, a user's next request) must end
            # here, or its next request reaches the target after the drain and no row
            # stands for it (#44 item 2).
            raise asyncio.CancelledError
        self._requests.answered(slot, rspec, parser.summary)
        summary = parser.summary
        follow = self.follow_ups
        if (
            follow is not None
            and exchange.error is None
            and not self.control.should_stop()
            and follow.wants(summary.status, summary.retry_after_s)
        ):
            assert summary.retry_after_s is not None  # wants() checked it
            coro = follow.follow(
                self, request, rspec, request_id, exchange.t_end, summary.retry_after_s
            )
            task = asyncio.get_running_loop().create_task(coro)
            self._follow_up_tasks.add(task)
            task.add_done_callback(self._follow_up_tasks.discard)

    def _cut_before_send(
        self, slot: Slot, t_intended_abs: int | None, waiting_since: int, planned: bool
    ) -> None:
        """The drain has cut the run before this send began."""
        if planned and t_intended_abs is not None:
            # Handed a connection as the drain cut the run: never sent, and interrupted, as
            # the ones still waiting are.
            self._record_unsent(slot, t_intended_abs, waiting_since)
            return
        # A loop whose cancel was lost (or that was between two awaits) must not send a
        # request no row will stand for (#44 item 2).
        raise asyncio.CancelledError

    def _stage_ended(self, stage: int, t_intended_abs: int | None) -> bool:
        """A [stop] rule ended the stage before this request was due: it is not sent (the
        run's stop record counts what was left unsent)."""
        ended = self.control.ended
        if ended is None:
            return False
        at = ended.stage(stage)
        return at != 0 and (now_ns() if t_intended_abs is None else t_intended_abs) >= at

    def _record(
        self,
        slot: Slot,
        t_intended_abs: int | None,
        rspec: RequestSpec,
        exchange: Exchange,
        summary: ResponseSummary,
    ) -> None:
        start = self.start_ns
        error: str | None
        error = exchange.error.error_class if exchange.error is not None else summary.error
        itl_mean, itl_p99, itl_max = summary.itl()
        t_send = exchange.t_send or now_ns()
        t_end = exchange.t_end or now_ns()
        status, prompt_tokens, output_tokens = (
            summary.status,
            summary.prompt_tokens,
            summary.output_tokens,
        )
        reasoning, reasoning_from_usage = summary.thinking_tokens()
        if not all(_fits(v) for v in (status, prompt_tokens, output_tokens, reasoning)):
            # A number from the target no int64 column holds (usage 10^30, :status 99999999999)
            # would break the Arrow batch and lose every sample: keep the row, drop the value.
            status = status if _fits(status) else 0
            prompt_tokens = prompt_tokens if _fits(prompt_tokens) else None
            output_tokens = output_tokens if _fits(output_tokens) else None
            reasoning = reasoning if _fits(reasoning) else None
            error = error or OUT_OF_RANGE
        sample = Sample(
            request_id=slot.request_id,
            worker=self.spec.worker,
            stage=slot.stage,
            request_class=rspec.request_class,
            t_intended=None if t_intended_abs is None else t_intended_abs - start,
            t_send=t_send - start,
            t_headers=None if summary.t_headers is None else summary.t_headers - start,
            t_first_token=None if summary.t_first_token is None else summary.t_first_token - start,
            t_last_token=None if summary.t_last_token is None else summary.t_last_token - start,
            t_end=t_end - start,
            status=status,
            error=error,
            prompt_tokens=prompt_tokens
            if prompt_tokens is not None
            else rspec.prompt_tokens_estimate,
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
            source_row=rspec.source_row,
            cached_tokens=summary.cached_tokens,
            session=slot.session,
            turn=slot.turn,
            resent=exchange.resent,
            connection_wait=exchange.connection_wait,
            t_first_answer=None
            if summary.t_first_answer is None
            else summary.t_first_answer - start,
            carried=summary.carried,
            reasoning_tokens=reasoning,
            reasoning_from_usage=reasoning_from_usage and reasoning is not None,
            tool_calls=min(summary.tool_calls, 2**31 - 1),
        )
        self.recorder.add(sample)
        counts = self.control.stats.counts
        if counts is not None:
            counts.record(sample)
        key = str(status) if error is None or status else f"transport:{error}"
        self.control.stats.record(key, error is None, (t_end - t_send) / 1e6)
        if self.control.stats.completions is not None:
            self.control.stats.complete(sample)

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def dispatch(self, slot: Slot, due_abs: int) -> None:
        """Send now, or queue as a record until a send ends and frees its connection. An
        open-loop arrival: its slot is its request id and stage (all Waiting keeps)."""
        if self._free_sends > 0:
            self._free_sends -= 1
            self._start(slot, due_abs, 0)
        else:
            self._waiting.push(slot, due_abs, now_ns())

    def _start(self, slot: Slot, due_abs: int, waiting_since: int) -> None:
        """A send the schedule planned: it keeps its row whatever happens."""
        coro = self.send(slot, due_abs, waiting_since=waiting_since, planned=True)
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        """A dispatched send ended: its connection goes to the oldest waiting one."""
        self._tasks.discard(task)
        if self._waiting and not self._cut:
            self._start(*self._waiting.pop())
        else:
            self._free_sends += 1

    def _record_waiting(self) -> None:
        """The run ended with sends still waiting for a connection: each keeps its row, as
        a waiting task cut at the end would (interrupted, never written), flushed a batch at
        a time so that neither the buffer nor one flush grows with them."""
        waiting, self._waiting = self._waiting, Waiting()
        for n in range(len(waiting)):
            self._record_unsent(*waiting.pop())
            if n % RECORD_BATCH == RECORD_BATCH - 1:
                self.recorder.flush()

    def _record_unsent(self, slot: Slot, due_abs: int, since: int) -> None:
        """The row of a planned send the run's end cut before it was written; `since`: when
        it began to wait for a connection (0: it did not wait)."""
        if self._stage_ended(slot.stage, due_abs):
            return  # left unsent by a [stop] rule, as send() leaves it
        rspec = self._requests.request(slot)
        end = now_ns()
        exchange = Exchange(t_send=end, t_end=end, error=Cancelled("interrupted"))
        exchange.connection_wait = end - since if since else 0
        exchange.http_version = "2" if self.spec.http2 else "1.1"  # what it would have been
        self.control.stats.sent += 1
        self._record(slot, due_abs, rspec, exchange, NO_RESPONSE)

    async def sleep_until(self, due_abs: int) -> bool:
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

    # ------------------------------------------------------------------ lifecycle
    async def _housekeeping(self) -> None:
        interval = self.control.progress_interval_s
        last_progress = 0.0
        while True:
            # Often enough to catch FLUSH_ROWS rows at 20,000 a second.
            await asyncio.sleep(min(self.spec.flush_interval_s / 2, interval / 2, HOUSEKEEPING_S))
            if self.recorder.due():
                steps = self.recorder.flush_steps()
                try:
                    for _ in steps:
                        await asyncio.sleep(0)
                finally:
                    steps.close()  # cancelled mid-flush: its rows go back for close()
            now = time.monotonic()
            if self.control.on_progress is not None and now - last_progress >= interval:
                last_progress = now
                due = None if self._work is None else self._work.due(now_ns() - self.start_ns)
                if due is not None:
                    self.control.stats.due = due
                self.control.on_progress(self.control.stats.snapshot())

    async def _drain(self) -> None:
        """Wait for in-flight requests; after a stop request, give them a short grace only."""
        if not self._tasks and not self._waiting:
            return
        if self.control.stopped_early:
            grace = 1.0
        elif self.spec.drain_timeout_s is not None:
            grace = self.spec.drain_timeout_s
        else:
            grace = self.spec.timeout_s + 1.0
        deadline = time.monotonic() + grace
        while (self._tasks or self._waiting) and time.monotonic() < deadline:
            if self.control.should_stop() and not self.control.stopped_early:
                self.control.stopped_early = True
                deadline = min(deadline, time.monotonic() + 1.0)
            await asyncio.wait(set(self._tasks), timeout=0.1)
        self._cut = True
        self._record_waiting()  # before the cancels: a cancelled send would start one
        # A send a connection was just handed to may not have begun: cancelled before its
        # first step, it would end without its row. One turn of the loop lets each begin
        # (and, the run being cut, record itself unsent).
        await asyncio.sleep(0)
        for task in list(self._tasks):
            task.cancel()
        await _wait_while_ending(self._tasks)
        await self._cut_follow_ups()

    async def _cut_follow_ups(self) -> None:
        """Follow-ups never extend the run: the ones still waiting or trying end with it."""
        for task in list(self._follow_up_tasks):
            task.cancel()
        if self._follow_up_tasks:
            await asyncio.wait(set(self._follow_up_tasks), timeout=5.0)

    async def run(self, work: Work) -> LiveStats:
        loop = asyncio.get_running_loop()
        housekeeping = loop.create_task(self._housekeeping())
        lag = LoopLag()
        probe = loop.create_task(lag.watch())
        try:
            await self.sleep_until(self.start_ns)  # t = 0 of every t_* column
            self._work = work
            await work.run(self)
            await self._drain()
        finally:
            for task in (housekeeping, probe):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            lag.write(lag_path(Path(self.spec.out_dir), self.spec.worker))
            self.recorder.close()
            if self.follow_ups is not None:
                await self._cut_follow_ups()  # a run that raised skipped the drain
                self.follow_ups.write()
            await self.transport.close()
            if self.control.on_progress is not None:
                self.control.on_progress(self.control.stats.snapshot())
        return self.control.stats


async def _wait_while_ending(tasks: set[asyncio.Task[None]]) -> None:
    """Wait for cancelled sends to end, each recording its row as it does, for as long as
    one of them ends every CUT_WAIT_S: a loop held for seconds (a large flush) must not
    leave rows behind, and a send that ignores its cancel must not hold the run forever."""
    pending = set(tasks)
    while pending:
        before = len(pending)
        _, pending = await asyncio.wait(pending, timeout=CUT_WAIT_S)
        if len(pending) == before:
            return


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
