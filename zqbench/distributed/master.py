"""The master: `zqbench run --distributed`'s stage 3 on a Locust MasterRunner (no web UI).

It runs in the run's main thread and drives gevent's hub itself, in short sleeps, so that
the hooks' threads, the signal handlers and the embedded server are left as they are
(Locust is imported without monkey patching: protocol.import_locust). Everything a worker
says arrives in a Locust message handler on this same thread; the loops here only look
at the ledger between sleeps.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from zqbench import __version__
from zqbench.distributed import auth
from zqbench.distributed import protocol as p
from zqbench.distributed.clock import ClockOffset
from zqbench.distributed.guard import MAX_PENDING, Door
from zqbench.distributed.ledger import FINISHED, WorkerSlot
from zqbench.distributed.outcome import DistributedOutcome, outcome
from zqbench.engines.live import ProgressCallback, merge_snapshots
from zqbench.engines.native import WorkerSpec, now_ns
from zqbench.engines.workers import StopFlag
from zqbench.errors import InterruptedRun, OptionError, TargetError
from zqbench.load import Work, work_to_wire
from zqbench.printable import one_line, shown

TICK_S = 0.05  # gevent runs only while we sleep; a signal is seen at the end of a sleep
START_LEAD_NS = 1_000_000_000  # t = 0 this long after the last worker is ready
READY_TIMEOUT_S = 60.0  # for every worker to open its pool and measure its clock
STOP_GRACE_S = 15.0  # after a stop, for the workers' last batches
END_MARGIN_S = 30.0  # past the schedule's end and its drain, before a silent worker is lost


@dataclass(frozen=True, slots=True)
class MasterSettings:
    secret: bytes  # shared with the workers, which prove it (auth.py); never sent
    # HOST:PORT for the workers' connections: loopback unless widened.
    bind: str = p.LOOPBACK_BIND
    expect_workers: int = 1
    wait_s: float = 60.0  # for the expected workers to join
    max_lost_share: float = 0.0
    api_key_env: str | None = None  # its name goes to the workers, never its value


def _stderr(line: str) -> None:
    print(one_line(line), file=sys.stderr, flush=True)


class Master:
    def __init__(
        self, settings: MasterSettings, out_dir: Path, *, on_note: Callable[[str], None] = _stderr
    ) -> None:
        self.settings = settings
        self.out_dir = out_dir
        self.on_note = on_note
        self.slots: list[WorkerSlot] = []
        self.channels: dict[str, auth.Channel] = {}  # node -> its session, once proven
        self.pending: dict[str, tuple[bytes, bytes, str]] = {}  # node -> (Nm, Nw, host)
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
        self.door = Door(self.runner, self.channels.__contains__, self._dropped)
        self.door.install()
        handlers: dict[str, Callable[[WorkerSlot | None, str, Any], None]] = {
            p.PING: self._ping,
            p.READY: self._ready,
            p.FAILED: self._failed,
            p.SAMPLES: self._samples,
            p.DONE: self._done,
        }
        self.runner.register_message(p.HELLO, self._unsealed(self._hello))
        self.runner.register_message(p.PROOF, self._unsealed(self._proof))
        for kind, handler in handlers.items():
            self.runner.register_message(kind, self._sealed(kind, handler))

    # ------------------------------------------------------------------ messages
    def _unsealed(self, handle: Callable[[str, dict[str, Any]], None]) -> Any:
        def listener(environment: Any, msg: Any) -> None:
            if not isinstance(msg.data, dict):
                self.door.drop("malformed content", msg.node_id, f"{msg.type} is not a map")
                return
            try:
                handle(msg.node_id, msg.data)
            except (KeyError, TypeError, ValueError) as exc:
                self.door.drop("malformed content", msg.node_id, f"{msg.type}: {exc}")

        return listener

    def _sealed(self, kind: str, handle: Callable[[WorkerSlot | None, str, Any], None]) -> Any:
        """Only a proven worker's messages, opened with its session key, reach `handle`: the
        node id is the ZeroMQ identity they arrived under (guard.py checks it)."""

        def listener(environment: Any, msg: Any) -> None:
            node = msg.node_id
            channel = self.channels.get(node)
            if channel is None:
                self.door.drop("not proven", node, kind)
                return
            ok, data = channel.open(kind, msg.data)
            if not ok:
                self.door.drop("bad seal", node, kind)
                return
            slot = next((s for s in self.slots if s.node == node), None)
            try:
                handle(slot, node, data if data is not None else {})
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                self.door.drop("malformed content", node, f"{kind}: {type(exc).__name__}")

        return listener

    def _dropped(self, reason: str, node: str, detail: str) -> None:
        """The first of each reason is said on the terminal; all are counted (summary.json)."""
        if self.door.dropped[reason] == 1:
            what = f" ({detail})" if detail else ""
            self.on_note(
                f"zqbench master: dropped a message from {node[:80]}: {reason}{what};"
                " later ones of this kind are only counted"
            )

    def _send(self, kind: str, node: str, data: Any = None) -> None:
        if kind not in p.UNSEALED:
            data = self.channels[node].seal(kind, {} if data is None else data)
        self.runner.send_message(kind, data, client_id=node)

    def _hello(self, node: str, data: dict[str, Any]) -> None:
        if node in self.channels:
            return  # a repeated hello
        nonce = data["nonce"]
        if not auth.is_nonce(nonce):
            raise ValueError("no nonce (a zqbench worker older than the secret handshake?)")
        if self._full():
            self._refuse(node, self._full_reason())
            return
        mine = auth.new_nonce()
        self.pending.pop(node, None)
        self.pending[node] = (mine, nonce, _printable(data.get("host")))
        while len(self.pending) > MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))
        proof = auth.proof(self.settings.secret, "master", node, nonce, mine)
        self._send(p.CHALLENGE, node, {"nonce": mine, "proof": proof})

    def _proof(self, node: str, data: dict[str, Any]) -> None:
        if node in self.channels or node not in self.pending:
            self.door.drop("not proven", node, "a proof without a challenge")
            return
        mine, theirs, host = self.pending.pop(node)
        secret = self.settings.secret
        if not auth.proof_ok(secret, "worker", node, mine, theirs, data.get("proof")):
            self.door.drop("wrong proof", node, f"worker on {host}")
            self._refuse(node, "its proof of the shared secret is wrong", secret=True)
            self.door.forget(node)
            return
        if self._full():
            self._refuse(node, self._full_reason())
            return
        self.channels[node] = auth.Channel(secret, node, mine, theirs)
        self.slots.append(WorkerSlot(node=node, host=host))

    def _full(self) -> bool:
        return self.phase != "joining" or len(self.slots) >= self.settings.expect_workers

    def _full_reason(self) -> str:
        n = self.settings.expect_workers
        return f"the master at {self.address} already has its {n} workers for this run"

    def _refuse(self, node: str, reason: str, *, secret: bool = False) -> None:
        self._send(p.REFUSED, node, {"reason": reason, "secret": secret})

    def _ping(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        t2 = now_ns()
        if slot is not None:
            seq, t1 = _int(data["seq"]), _int(data["t1"])
            self._send(p.PONG, node, {"seq": seq, "t1": t1, "t2": t2, "t3": now_ns()})

    def _ready(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is not None and slot.state == "assigned":
            slot.clock = ClockOffset(*(_int(data[f.name]) for f in fields(ClockOffset)))
            slot.state = "ready"

    def _failed(self, slot: WorkerSlot | None, node: str, data: Any) -> None:
        if slot is not None:
            slot.failure = _printable(data.get("message"), limit=500) or "failed"

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
        slot.sent = _int(data.get("sent", 0))
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
            self._report(on_progress)
            _tick()
        self._report(on_progress)  # the last word of every worker, its final counts included

    def _report(self, on_progress: ProgressCallback | None) -> None:
        if on_progress is not None:
            snaps = [s.progress for s in self.slots if s.progress is not None]
            if snaps:
                on_progress(merge_snapshots(snaps))

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
            rejected=dict(self.door.dropped),
        )


def _tick() -> None:
    import gevent

    gevent.sleep(TICK_S)


def _end_ns(start_ns: int, specs: list[WorkerSpec], works: list[Work]) -> int:
    """When the last worker must have said done: schedule, drain, margin."""
    last = max((work.end_ns() for work in works), default=0)
    spec = specs[0]
    drain = spec.drain_timeout_s if spec.drain_timeout_s is not None else spec.timeout_s + 1
    return start_ns + last + int((drain + END_MARGIN_S) * 1e9)


def _int(value: Any) -> int:
    """A worker's integer field (ValueError unless protocol.is_int64)."""
    if not p.is_int64(value):
        raise ValueError(f"an int64 expected, not {type(value).__name__}")
    return value


def _printable(value: Any, *, limit: int = 255) -> str:
    """A worker's text for the terminal and the summary: a bounded, printable string."""
    return shown(value, limit) if isinstance(value, str) else "?"
