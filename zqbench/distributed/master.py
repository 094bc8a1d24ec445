"""The master: `zqbench run --distributed`'s stage 3 on a Locust MasterRunner (no web UI).

It runs in the run's main thread and drives gevent's hub itself, in short sleeps, so that
the hooks' threads, the signal handlers and the embedded server are left as they are
(Locust is imported without monkey patching: protocol.import_locust). Everything a worker
says arrives in a Locust message handler on this same thread; the loops here only look
at the ledger between sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zqbench import __version__
from zqbench.distributed import protocol as p
from zqbench.distributed.clock import ClockOffset
from zqbench.distributed.ledger import FINISHED, WorkerSlot
from zqbench.distributed.outcome import DistributedOutcome, outcome
from zqbench.engines.live import ProgressCallback, merge_snapshots
from zqbench.engines.native import WorkerSpec, now_ns
from zqbench.engines.workers import StopFlag
from zqbench.errors import InterruptedRun, OptionError, TargetError
from zqbench.load import Work, work_to_wire

TICK_S = 0.05  # gevent runs only while we sleep; a signal is seen at the end of a sleep
START_LEAD_NS = 1_000_000_000  # t = 0 this long after the last worker is ready
READY_TIMEOUT_S = 60.0  # for every worker to open its pool and measure its clock
STOP_GRACE_S = 15.0  # after a stop, for the workers' last batches
END_MARGIN_S = 30.0  # past the schedule's end and its drain, before a silent worker is lost


@dataclass(frozen=True, slots=True)
class MasterSettings:
    # HOST:PORT for the workers' connections: loopback unless widened (#25: the master has
    # no authentication yet, so every interface would let anyone join and read the share).
    bind: str = p.LOOPBACK_BIND
    expect_workers: int = 1
    wait_s: float = 60.0  # for the expected workers to join
    max_lost_share: float = 0.0
    api_key_env: str | None = None  # its name goes to the workers, never its value


class Master:
    def __init__(self, settings: MasterSettings, out_dir: Path) -> None:
        self.settings = settings
        self.out_dir = out_dir
        self.slots: list[WorkerSlot] = []
        self.phase = "joining"
        self.start_ns = 0
        host, port = p.parse_address(settings.bind, default_host=p.LOOPBACK)
        environment = p.import_locust()(user_classes=[])
        try:
            self.runner = environment.create_master_runner(host, port)
        except SystemExit:  # Locust exits on a busy port; anything else is an OSError
            raise OptionError(
                "master_bind", "cannot listen there (the port is in use?)", value=settings.bind
            ) from None
        self.address = f"{host}:{self.runner.server.port}"
        handlers: dict[str, Callable[[WorkerSlot | None, str, Any], None]] = {
            p.HELLO: self._hello,
            p.PING: self._ping,
            p.READY: self._ready,
            p.FAILED: self._failed,
            p.SAMPLES: self._samples,
            p.DONE: self._done,
        }
        for kind, handler in handlers.items():
            self.runner.register_message(kind, self._handler(handler))

    # ------------------------------------------------------------------ messages
    def _handler(self, handle: Callable[[WorkerSlot | None, str, Any], None]) -> Any:
        def listener(environment: Any, msg: Any) -> None:
            slot = next((s for s in self.slots if s.node == msg.node_id), None)
            handle(slot, msg.node_id, msg.data)

        return listener

    def _send(self, kind: str, node: str, data: Any = None) -> None:
        self.runner.send_message(kind, data, client_id=node)

    def _hello(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is not None:
            return  # a repeated hello
        expected = self.settings.expect_workers
        if self.phase != "joining" or len(self.slots) >= expected:
            reason = f"the master at {self.address} already has its {expected} workers for this run"
            self._send(p.REFUSED, node, {"reason": reason})
            return
        self.slots.append(WorkerSlot(node=node, host=str(data.get("host", "?"))))

    def _ping(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        t2 = now_ns()
        if slot is not None:
            self._send(p.PONG, node, {**data, "t2": t2, "t3": now_ns()})

    def _ready(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is not None and slot.state == "assigned":
            slot.clock = ClockOffset(**data)
            slot.state = "ready"

    def _failed(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is not None:
            slot.failure = str(data.get("message", "failed"))

    def _samples(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is None:
            return
        if data.get("batch"):
            slot.add(p.batch_from_bytes(data["batch"]))
        if data.get("progress"):
            slot.progress = p.progress_from_wire(data["progress"])

    def _done(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is None or slot.state in FINISHED:
            return
        slot.sent = int(data.get("sent", 0))
        slot.finish("stopped" if data.get("stopped_early") else "done")
        self._send(p.BYE, node)

    # ------------------------------------------------------------------ the run
    def run(
        self,
        specs: list[WorkerSpec],
        works: list[Work],
        *,
        on_progress: ProgressCallback | None,
        stop: StopFlag,
        on_start: Callable[[int], None],
    ) -> tuple[int, bool]:
        """Join, assign, clocks, t = 0, collect. Returns (start_monotonic_ns, interrupted)."""
        try:
            self._join(stop)
            self._assign(specs, works, stop)
            self.start_ns = now_ns() + START_LEAD_NS
            for slot in self.slots:
                self._send(p.START, slot.node, {"start_ns": self.start_ns})
                slot.state = "running"
            on_start(self.start_ns)
            self._collect(_end_ns(self.start_ns, specs, works), on_progress, stop)
            return self.start_ns, stop.is_set()
        finally:
            self._close()

    def _join(self, stop: StopFlag) -> None:
        n = self.settings.expect_workers
        deadline = time.monotonic() + self.settings.wait_s
        while len(self.slots) < n:
            if stop.is_set():
                raise InterruptedRun("interrupted while waiting for workers")
            if time.monotonic() > deadline:
                raise TargetError(
                    f"{len(self.slots)} of {n} workers joined the master at {self.address}"
                    f" within {self.settings.wait_s:g} s; start `zqbench worker --master"
                    f" HOST:{self.runner.server.port}` on each load machine, or lower"
                    " --expect-workers"
                )
            _tick()
        self.phase = "assigning"

    def _assign(self, specs: list[WorkerSpec], works: list[Work], stop: StopFlag) -> None:
        for index, (slot, spec, work) in enumerate(zip(self.slots, specs, works, strict=True)):
            slot.assign(index, work, self.out_dir)
            assignment = {
                "index": index,
                "run": self.out_dir.name,
                "spec": p.spec_to_wire(spec),
                "work": work_to_wire(work),
                "api_key_env": self.settings.api_key_env,
                "version": __version__,
            }
            self._send(p.ASSIGN, slot.node, assignment)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while any(s.state != "ready" for s in self.slots):
            if stop.is_set():
                raise InterruptedRun("interrupted before the load started")
            for slot in self.slots:
                if slot.failure:
                    raise TargetError(f"worker {slot.index} ({slot.host}): {slot.failure}")
                if self._gone(slot):
                    raise TargetError(
                        f"worker {slot.index} ({slot.host}) was lost before the load started"
                    )
            if time.monotonic() > deadline:
                late = [f"{s.index} ({s.host})" for s in self.slots if s.state != "ready"]
                raise TargetError(
                    f"workers {', '.join(late)} did not open their connections within"
                    f" {READY_TIMEOUT_S:g} s"
                )
            _tick()
        self.phase = "running"

    def _collect(self, end_ns: int, on_progress: ProgressCallback | None, stop: StopFlag) -> None:
        stop_deadline: float | None = None
        while any(s.state not in FINISHED for s in self.slots):
            now = time.monotonic()
            if stop.is_set() and stop_deadline is None:
                stop_deadline = now + STOP_GRACE_S
                for slot in self.slots:
                    if slot.state not in FINISHED:
                        self._send(p.STOP, slot.node)
            at_s = (now_ns() - self.start_ns) / 1e9
            for slot in self.slots:
                if slot.state in FINISHED:
                    continue
                if self._gone(slot):
                    slot.finish("lost", at_s=at_s, why="its heartbeats stopped")
                elif now_ns() > end_ns or (stop_deadline is not None and now > stop_deadline):
                    slot.finish("lost", at_s=at_s, why="it never said it was done")
            if on_progress is not None:
                snaps = [s.progress for s in self.slots if s.progress is not None]
                if snaps:
                    on_progress(merge_snapshots(snaps))
            _tick()

    def _gone(self, slot: WorkerSlot) -> bool:
        """Locust's heartbeats: a worker missing for 3 s, or one that said quit."""
        client = self.runner.clients.get(slot.node)
        return client is None or client.state == "missing"

    def _close(self) -> None:
        for slot in self.slots:
            if slot.state not in FINISHED:
                self._send(p.STOP, slot.node)  # never leave a worker running a dead run
            if slot.writer is not None:
                slot.writer.close()
        self.runner.quit()
        self.runner.server.close(linger=0)

    def outcome(self, *, offered: int, duration_s: float) -> DistributedOutcome:
        return outcome(
            self.slots,
            master=self.address,
            offered=offered,
            max_lost_share=self.settings.max_lost_share,
            duration_s=duration_s,
        )


def _tick() -> None:
    import gevent

    gevent.sleep(TICK_S)


def _end_ns(start_ns: int, specs: list[WorkerSpec], works: list[Work]) -> int:
    """When the last worker must have said done: schedule, drain, margin."""
    last = 0
    for work in works:
        last = max(last, work.end_ns())
    spec = specs[0]
    drain = spec.drain_timeout_s if spec.drain_timeout_s is not None else spec.timeout_s + 1
    return start_ns + last + int((drain + END_MARGIN_S) * 1e9)
