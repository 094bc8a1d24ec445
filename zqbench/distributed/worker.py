"""`zqbench worker --master HOST[:PORT]`: a Locust WorkerRunner that runs its share of a
zqbench run with zqbench's own engine (docs/distributed.md).

One thread. Before the load the main greenlet waits in gevent sleeps; during the load the
engine's asyncio loop owns the thread and a `_pump` task hands gevent's hub a turn every
`PUMP_S`: Locust's heartbeats and messages go out and come in there, and so do the sample
batches the recorder flushed. The engine never waits on the network to the master.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from zqbench import __version__
from zqbench.distributed import auth
from zqbench.distributed import protocol as p
from zqbench.distributed.clock import ROUNDS, ClockOffset, ClockRound, best_offset
from zqbench.engines.live import WorkerProgress
from zqbench.engines.native import NativeWorker, WorkerControl, now_ns, open_worker, run_async
from zqbench.engines.workers import StopFlag, freeze_heap, stop_on_signals
from zqbench.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TARGET,
    EXIT_USAGE,
    OptionError,
    TargetError,
)
from zqbench.load import work_from_wire
from zqbench.safe_files import make_dir
from zqbench.samples.writer import stream_path
from zqbench.transport.base import ConnectError

PUMP_S = 0.02  # gevent's turn during the load: heartbeats, messages, batches
MASTER_SILENT_S = 10.0  # no heartbeat from the master this long: stop the load
BYE_TIMEOUT_S = 10.0
LOCUST_CONNECT_TRIES = 2  # of CONNECT_TIMEOUT (5 s) each, once something listens


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    master: str  # HOST[:PORT]
    secret: bytes  # shared with the master (auth.py): proven, never sent
    out: Path = Path("reports/workers")  # each run's own Arrow file, under <out>/<run>/
    once: bool = False  # serve one run, then exit
    connect_timeout_s: float = 60.0  # for a master to listen; 0: wait as long as it takes

    def __post_init__(self) -> None:
        if not (math.isfinite(self.connect_timeout_s) and self.connect_timeout_s >= 0):
            raise OptionError(
                "connect_timeout",
                "must be a finite number of seconds, 0 or more (0 waits as long as it takes)",
                value=f"{self.connect_timeout_s:g}",
            )


def serve(options: WorkerOptions, *, on_note: Callable[[str], None] = print) -> int:
    """Serve runs until Ctrl-C (or one with `once`); the last run's exit code."""
    host, port = _master_address(options.master)
    stop = StopFlag()
    with stop_on_signals(stop):
        while True:
            on_note(f"zqbench worker: waiting for a master at {host}:{port}")
            if not _await_master(host, port, stop, options.connect_timeout_s):
                return EXIT_INTERRUPTED
            code = _Session(host, port, options, stop, on_note).serve()
            if options.once or stop.is_set() or code == EXIT_USAGE:
                return code


def _await_master(host: str, port: int, stop: StopFlag, timeout_s: float) -> bool:
    """Until something listens at host:port (True), or Ctrl-C/SIGTERM (False); TargetError
    past `timeout_s`. Probed with plain TCP connects, so a signal is seen within a second
    (Locust's own connect retries for 300 s and hears no signal meanwhile)."""
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    while not stop.is_set():
        with contextlib.suppress(OSError):
            socket.create_connection((host, port), timeout=1.0).close()
            return True
        if deadline is not None and time.monotonic() > deadline:
            raise TargetError(
                f"no zqbench master answered at {host}:{port} within {timeout_s:g} s; start"
                " `zqbench run --distributed` there first, or raise --connect-timeout"
            )
        time.sleep(0.5)
    return False


def _master_address(value: str) -> tuple[str, int]:
    try:
        return p.parse_address(value, default_host="127.0.0.1")
    except ValueError as exc:
        raise OptionError("master", "expected HOST[:PORT]", value=value) from exc


class _Session:
    """One run, from connecting to the master to its goodbye."""

    def __init__(
        self,
        host: str,
        port: int,
        options: WorkerOptions,
        stop: StopFlag,
        on_note: Callable[[str], None],
    ) -> None:
        self.out, self.secret, self.stop, self.note = options.out, options.secret, stop, on_note
        # (arrival time, data) per kind; sealed ones are opened when taken
        self.inbox: dict[str, list[tuple[int, Any]]] = {kind: [] for kind in p.MASTER_MESSAGES}
        self.channel: auth.Channel | None = None
        self.stopped = False  # a sealed zq_stop arrived
        self.master_lost = False  # it went silent: the load stopped, the exit is not 0
        self.outbox: list[tuple[str, Any]] = []
        self.progress: WorkerProgress | None = None
        environment = p.import_locust()(user_classes=[])
        import locust.runners

        # It listens (_await_master): a few 5 s tries, not Locust's 60, for it to answer.
        locust.runners.CONNECT_RETRY_COUNT = LOCUST_CONNECT_TRIES
        try:
            self.runner = environment.create_worker_runner(host, port)
        except ConnectionError:
            raise TargetError(f"no zqbench master answered at {host}:{port}") from None
        for kind in p.MASTER_MESSAGES:
            self.runner.register_message(kind, self._listener(kind))
        self.address = f"{host}:{port}"
        self.began = time.time()

    def _listener(self, kind: str) -> Any:
        def listener(environment: Any, msg: Any) -> None:
            # Stamped on arrival, before anything else (a pong's t4).
            self.inbox[kind].append((now_ns(), msg.data))

        return listener

    def _take(self, kind: str) -> dict[str, Any] | None:
        """The oldest `kind` from the master that is a map and, after the handshake, carries
        this session's seal; anything else is dropped, and said."""
        box = self.inbox[kind]
        while box:
            arrived, raw = box.pop(0)
            ok, data = (True, raw) if kind in p.UNSEALED else self._open(kind, raw)
            if ok and isinstance(data, dict):
                return {**data, "t4": arrived} if kind == p.PONG else data
            self.note(f"zqbench worker: dropped a {kind} from {self.address}: not sealed")
        return None

    def _open(self, kind: str, raw: Any) -> tuple[bool, Any]:
        return (False, None) if self.channel is None else self.channel.open(kind, raw)

    def _send(self, kind: str, data: Any = None) -> None:
        if self.channel is not None and kind not in p.UNSEALED and kind.startswith("zq_"):
            data = self.channel.seal(kind, {} if data is None else data)
        self.runner.send_message(kind, data)

    def serve(self) -> int:
        try:
            nonce = auth.new_nonce()
            hello = {"host": socket.gethostname(), "pid": os.getpid(), "version": __version__}
            self._send(p.HELLO, {**hello, "nonce": nonce})
            challenge = self._wait_for(p.CHALLENGE, "before it answered the hello")
            if isinstance(challenge, int):
                return challenge
            refused = self._prove(nonce, challenge)
            if refused is not None:
                return refused
            assignment = self._wait_for(p.ASSIGN, "before it assigned a share")
            if isinstance(assignment, int):
                return assignment
            return self._run(assignment)
        finally:
            with contextlib.suppress(Exception):
                self._send("quit")  # Locust's: the master forgets us at once
            self.runner.quit()
            self.runner.client.close(linger=1000)

    def _wait_for(self, kind: str, when: str) -> dict[str, Any] | int:
        """The master's next `kind`, or the exit code of a refusal, of the master ending the
        run (a sealed stop: only once the handshake made a channel), of its silence, or of
        Ctrl-C."""
        import gevent

        while not self.stop.is_set():
            refused = self._refused()
            if refused is not None:
                return refused
            message = self._take(kind)
            if message is not None:
                return message
            if self.channel is not None and self._take(p.STOP) is not None:
                self.note(f"zqbench worker: the master at {self.address} ended the run early")
                return EXIT_TARGET
            if self._master_silent():
                return self._lost(when)
            gevent.sleep(0.02)
        return EXIT_INTERRUPTED

    def _prove(self, nonce: bytes, challenge: dict[str, Any]) -> int | None:
        """Prove the secret to a master that proved it first; None once proven, else exit
        code 2: the secret differs (retrying cannot help)."""
        node = self.runner.client_id
        theirs = challenge.get("nonce")
        shown = challenge.get("proof")
        if not auth.is_nonce(theirs) or not auth.proof_ok(
            self.secret, "master", node, nonce, theirs, shown
        ):
            self.note(
                f"zqbench worker: the master at {self.address} did not prove the shared"
                " secret; leaving it (is the secret the same on both?)"
            )
            return EXIT_USAGE
        proof = auth.proof(self.secret, "worker", node, theirs, nonce)
        self._send(p.PROOF, {"proof": proof})
        self.channel = auth.Channel(self.secret, node, theirs, nonce)
        return None

    def _refused(self) -> int | None:
        """The exit code of a refusal: 2 for a secret that differs, 3 otherwise; None: none."""
        refused = self._take(p.REFUSED)
        if refused is None:
            return None
        reason = refused.get("reason")
        said = reason[:300] if isinstance(reason, str) else "?"
        self.note(f"zqbench worker: refused by {self.address}: {said}")
        return EXIT_USAGE if refused.get("secret") is True else EXIT_TARGET

    def _run(self, assignment: dict[str, Any]) -> int:
        index = int(assignment["index"])
        run = assignment.get("run")
        if not p.is_run_name(run):
            # A run's folder is one name under --out: `../..` or a path would write elsewhere.
            self._send(p.FAILED, {"message": f"refused run name {run!r}: not a folder name"})
            self.note(f"zqbench worker: refused run name {run!r} from {self.address}")
            return EXIT_USAGE
        out_dir = make_dir(self.out / str(run))
        key_env = assignment.get("api_key_env")
        api_key = os.environ.get(key_env) if key_env else None
        if key_env and not api_key:
            self._send(p.FAILED, {"message": f"{key_env} is not set on {socket.gethostname()}"})
            return EXIT_USAGE
        spec = p.spec_from_wire(assignment["spec"], api_key=api_key, out_dir=str(out_dir))
        work = work_from_wire(assignment["work"])
        self.note(f"zqbench worker: running share {index} of run {assignment['run']}")
        control = WorkerControl(
            should_stop=self._should_stop,
            on_progress=self._on_progress,
            on_batch=self._on_batch,
        )
        return int(run_async(self._load(spec, work, control)))

    def _should_stop(self) -> bool:
        if not self.stopped and self._take(p.STOP) is not None:
            self.stopped = True
        if not self.master_lost and self._master_silent():
            self.master_lost = True
        return self.stop.is_set() or self.stopped or self.master_lost

    def _master_silent(self) -> bool:
        """No heartbeat from the master for MASTER_SILENT_S (counted from the connection
        until the first one arrives: a master that died at once never sends one)."""
        last = self.runner.last_heartbeat_timestamp or self.began
        return time.time() - last > MASTER_SILENT_S

    def _lost(self, when: str) -> int:
        self.note(
            f"zqbench worker: the master at {self.address} went silent {when}"
            f" (no heartbeat for {MASTER_SILENT_S:g} s)"
        )
        return EXIT_TARGET

    def _on_progress(self, snapshot: WorkerProgress) -> None:
        self.progress = snapshot

    def _on_batch(self, batch: pa.RecordBatch) -> None:
        self.outbox.append((p.SAMPLES, {"batch": p.batch_to_bytes(batch)}))

    # ------------------------------------------------------------------ in the loop
    async def _load(self, spec: Any, work: Any, control: WorkerControl) -> int:
        try:
            worker = await open_worker(spec, control)
        except ConnectError as exc:
            self._send(p.FAILED, {"message": str(exc)})
            return EXIT_TARGET
        pump = asyncio.get_running_loop().create_task(self._pump())
        try:
            clock = await self._measure_clock()
            self._send(p.READY, dataclasses.asdict(clock))
            start = await self._wait_for_start()
            if start is None:
                worker.recorder.close()
                await worker.transport.close()
                return EXIT_INTERRUPTED
            freeze_heap()
            worker.start_ns = clock.to_worker(start)
            await worker.run(work)
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        return await self._finish(worker)

    async def _pump(self) -> None:
        import gevent

        last_progress = 0.0
        while True:
            gevent.sleep(0)
            self._flush_outbox()
            now = time.monotonic()
            if self.progress is not None and now - last_progress >= 0.5:
                last_progress = now
                self._send(p.SAMPLES, {"progress": p.progress_to_wire(self.progress)})
            await asyncio.sleep(PUMP_S)

    def _flush_outbox(self) -> None:
        while self.outbox:
            kind, data = self.outbox.pop(0)
            self._send(kind, data)

    async def _measure_clock(self) -> ClockOffset:
        """ROUNDS pings, each waited for by polling gevent's hub directly (the pump's
        20 ms turns would add up to 20 ms to every round trip)."""
        import gevent

        rounds: list[ClockRound] = []
        for seq in range(ROUNDS):
            self._send(p.PING, {"seq": seq, "t1": now_ns()})
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                gevent.sleep(0)
                pong = self._take(p.PONG)
                if pong is not None and pong["seq"] == seq:
                    rounds.append(ClockRound(pong["t1"], pong["t2"], pong["t3"], pong["t4"]))
                    break
            await asyncio.sleep(0.005)  # let the loop breathe between rounds
        if not rounds:
            raise TargetError(f"the master at {self.address} never answered a clock ping")
        return best_offset(rounds)

    async def _wait_for_start(self) -> int | None:
        while not self._should_stop():
            start = self._take(p.START)
            if start is not None:
                return int(start["start_ns"])
            await asyncio.sleep(0.005)
        return None

    async def _finish(self, worker: NativeWorker) -> int:
        """The last batches (flushed when the recorder closed), then done, then bye."""
        import gevent

        self._flush_outbox()
        stats = worker.control.stats
        # The final counts, taken now: the pump's last progress may predate the last
        # requests, and the master's live exposition must end at summary.json's numbers.
        self._send(p.SAMPLES, {"progress": p.progress_to_wire(stats.snapshot())})
        self._send(
            p.DONE,
            {
                "sent": stats.sent,
                "recorded": worker.recorder.written,
                "stopped_early": worker.control.stopped_early,
            },
        )
        if self.master_lost:
            where = stream_path(Path(worker.spec.out_dir), worker.spec.worker)
            return self._lost(f"during the load; it stopped, and its samples are in {where}")
        deadline = time.monotonic() + BYE_TIMEOUT_S
        while self._take(p.BYE) is None and time.monotonic() < deadline:
            gevent.sleep(0.05)
        return EXIT_INTERRUPTED if self.stop.is_set() else EXIT_OK
