"""Run a schedule in this process, or split across `--workers N` processes.

All workers share one start time on CLOCK_MONOTONIC (system-wide on Linux), set
only after every worker has opened its connection pool, so warm-up is never
charged to the schedule. Each worker writes its own sample stream; the caller
merges them. Ctrl-C in the parent stops every worker; the children ignore SIGINT
themselves so that the parent decides. A worker whose parent died (even by SIGKILL)
stops sending at once and exits within `ORPHAN_GRACE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from zqbench.engines.live import ProgressCallback, WorkerProgress, merge_snapshots
from zqbench.engines.native import (
    WorkerControl,
    WorkerSpec,
    now_ns,
    open_worker,
    run_async,
)
from zqbench.errors import InterruptedRun, TargetError
from zqbench.load import Work
from zqbench.stop.ended import EndedAt
from zqbench.transport.base import ConnectError

START_LEAD_NS = 50_000_000  # the first intended send is this long after everyone is ready
READY_TIMEOUT_S = 60.0
ORPHAN_GRACE_S = 3.0  # a worker whose parent died stops sending, then exits within this


def freeze_heap() -> None:
    """Move every object alive before the load into the GC's permanent generation.

    A full collection walks every tracked object; with typer, rich, pandas and pyarrow
    imported that is a pause of tens of milliseconds, which lands on whichever request is
    due at that moment. Frozen objects are never walked, so the pauses shrink to the
    run's own allocations."""
    gc.collect()
    gc.freeze()


class StopFlag:
    """Set by a signal handler or the caller; read by workers between sends.

    A plain attribute, no lock: a signal handler may run between any two bytecodes of the
    main thread, inside a handler interrupted while it held a lock too. With a
    threading.Event, a SIGTERM landing inside `Event.set()` can make the next one block on
    the Event's own lock, each further signal nesting another blocked handler: the likely
    cause of a RecursionError seen once (SIGTERM every 20 ms while the outputs were written,
    beside a CPU hog). Setting a bool is atomic under the GIL."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@contextlib.contextmanager
def stop_on_signals(stop: StopFlag) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` (a graceful stop) until the block ends.

    Nested uses restore the outer handlers, so `run_scenario` can keep signals handled
    until its hooks (nftables rules, samplers) are undone, past the end of the load."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may install handlers; the caller stops us otherwise
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _in_process(
    spec: WorkerSpec,
    work: Work,
    on_progress: ProgressCallback | None,
    stop: StopFlag,
    on_start: Callable[[int], None] | None,
    ended: EndedAt | None,
) -> tuple[int, bool]:
    """Run one worker here. Returns (start_monotonic_ns, interrupted): a [stop] rule that
    ended the run (`ended`) is no interruption.

    Signals are the caller's: `run_scenario` (or `zqbench worker`) holds the process's one
    `stop_on_signals` scope, which sets `stop`."""

    def progress(snapshot: WorkerProgress) -> None:
        if on_progress is not None:
            on_progress(merge_snapshots([snapshot]))

    async def main() -> tuple[int, bool]:
        control = WorkerControl(
            should_stop=_or_ended(stop.is_set, ended), on_progress=progress, ended=ended
        )
        try:
            worker = await open_worker(spec, control)
        except ConnectError as exc:
            raise TargetError(str(exc)) from None
        freeze_heap()
        worker.start_ns = now_ns() + START_LEAD_NS
        if on_start is not None:
            try:
                on_start(worker.start_ns)
            except BaseException:
                worker.recorder.close()
                await worker.transport.close()
                raise
        await worker.run(work)
        return worker.start_ns, stop.is_set()

    result: tuple[int, bool] = run_async(main())
    return result


def _or_ended(should_stop: Callable[[], bool], ended: EndedAt | None) -> Callable[[], bool]:
    """Stop when asked, or when a [stop] rule ended the run."""
    if ended is None:
        return should_stop
    return lambda: should_stop() or ended.run_ended()


# ---------------------------------------------------------------------- many processes
def _exit_with_parent(orphaned: threading.Event) -> None:
    """Block until the parent process ends, then stop the load and end this process.

    A spawned child's `parent_process().sentinel` is the read end of a pipe whose writer
    only the parent holds: it reads EOF when the parent ends by any means, SIGKILL
    included. Unlike Linux's PR_SET_PDEATHSIG it does not depend on which parent thread
    started us, and unlike polling getppid() it costs no wake-ups. `orphaned` stops the
    sends at once; the grace lets the sample stream close; the hard exit follows because a
    normal exit waits for the progress queue's feeder thread, which can block forever on
    a pipe nobody reads any more."""
    parent = mp.parent_process()
    if parent is None:  # not a multiprocessing child: nobody to outlive
        return
    mp_connection.wait([parent.sentinel])
    orphaned.set()
    time.sleep(ORPHAN_GRACE_S)  # an upper bound: a clean stop ends the process sooner
    os._exit(1)


def _child(
    spec: WorkerSpec,
    work: Work,
    ready_q: Any,
    progress_q: Any,
    start_value: Any,
    stop_event: Any,
    ended: EndedAt | None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    orphaned = threading.Event()
    threading.Thread(
        target=_exit_with_parent, args=(orphaned,), name="exit-with-parent", daemon=True
    ).start()

    def should_stop() -> bool:
        return orphaned.is_set() or stop_event.is_set()

    async def main() -> None:
        control = WorkerControl(
            should_stop=_or_ended(should_stop, ended),
            on_progress=lambda snap: progress_q.put((spec.worker, snap)),
            ended=ended,
        )
        try:
            worker = await open_worker(spec, control)
        except ConnectError as exc:
            ready_q.put((spec.worker, "error", str(exc)))
            return
        except Exception as exc:  # reported to the parent as a failed start, never lost
            ready_q.put((spec.worker, "error", f"{type(exc).__name__}: {exc}"))
            return
        freeze_heap()
        ready_q.put((spec.worker, "ready", ""))
        while start_value.value == 0:
            if should_stop():
                worker.recorder.close()
                await worker.transport.close()
                return
            await asyncio.sleep(0.002)
        worker.start_ns = int(start_value.value)
        await worker.run(work)

    run_async(main())


def run_workers(
    specs: list[WorkerSpec],
    works: list[Work],
    *,
    on_progress: ProgressCallback | None = None,
    stop: StopFlag | None = None,
    on_start: Callable[[int], None] | None = None,
    ended: EndedAt | None = None,
) -> tuple[int, bool]:
    """Run one worker in this process, or several in one spawned process each. Returns
    (start_monotonic_ns, interrupted). Signals are the caller's, as for `_in_process`;
    `ended` (shared when there are several) is the [stop] rules' word to the workers."""
    stop = stop or StopFlag()
    if len(specs) == 1:
        return _in_process(specs[0], works[0], on_progress, stop, on_start, ended)
    ctx = mp.get_context("spawn")  # fork would copy a running event loop and its sockets
    ready_q = ctx.Queue()
    progress_q = ctx.Queue()
    start_value = ctx.Value("q", 0)
    stop_event = ctx.Event()
    procs = [
        ctx.Process(
            target=_child,
            args=(spec, work, ready_q, progress_q, start_value, stop_event, ended),
            name=f"zqbench-worker-{spec.worker}",
        )
        for spec, work in zip(specs, works, strict=True)
    ]
    return _supervise(
        procs, ready_q, progress_q, start_value, stop_event, stop, on_progress, on_start
    )


def _supervise(
    procs: list[Any],
    ready_q: Any,
    progress_q: Any,
    start_value: Any,
    stop_event: Any,
    stop: StopFlag,
    on_progress: ProgressCallback | None,
    on_start: Callable[[int], None] | None,
) -> tuple[int, bool]:
    try:
        for p in procs:
            p.start()
        ready = 0
        deadline = time.monotonic() + READY_TIMEOUT_S
        while ready < len(procs):
            if stop.is_set():
                stop_event.set()
                raise InterruptedRun("interrupted before the load started")
            try:
                _, state, message = ready_q.get(timeout=0.1)
            except queue.Empty:
                if time.monotonic() > deadline:
                    stop_event.set()
                    raise TargetError(
                        "workers did not open their connections within 60 s"
                    ) from None
                continue
            if state == "error":
                stop_event.set()
                raise TargetError(message)
            ready += 1
        start_ns = now_ns() + START_LEAD_NS
        start_value.value = start_ns
        if on_start is not None:
            on_start(start_ns)

        latest: dict[int, WorkerProgress] = {}
        while any(p.is_alive() for p in procs) or not progress_q.empty():
            if stop.is_set():
                stop_event.set()
            try:
                worker, snap = progress_q.get(timeout=0.2)
                latest[worker] = snap
                if on_progress is not None:
                    on_progress(merge_snapshots(list(latest.values())))
            except queue.Empty:
                pass
        return start_ns, stop.is_set()
    except BaseException:
        stop_event.set()  # the children must not run a schedule nobody will read
        raise
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
