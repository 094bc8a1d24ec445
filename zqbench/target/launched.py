"""A server command zqbench launches itself (`zqbench sweep --server-cmd`), stopped by its
process group's id.

    with LaunchedServer(argv, "http://127.0.0.1:8000", log_path, ready_timeout_s=300) as s:
        ... s.ready_s ...           # started, and GET /health (or /v1/models) answered 2xx

`start()` refuses a target that answers before the command started (another server's
answer would pass for this one's), starts the command in a session, so a process group, of
its own (no shell: an argv list), its stdout and stderr into `log_path`, and waits until the
target answers `GET /health` with a 2xx (a server without /health: `GET /v1/models`),
polling every READY_POLL_S until `ready_timeout_s`. A command that exits first raises
`ServerExited`; one that never answers, `ServerNotReady` (it is stopped first); both say
the last lines of its log (`log_tail`: bounded, escaped).

`stop()` sends SIGTERM to the group, waits up to `term_timeout_s` for every process of it to
end, then SIGKILL, and waits until the target's port no longer accepts connections, so the
next launch on the same port never meets this one. It is idempotent, and runs however the
block ends (an error, Ctrl-C). Nothing is ever killed by name. A guard process holds a pipe
only zqbench writes: when zqbench dies by any means (SIGKILL included, where no `finally`
runs), it ends the group the same way, so no server outlives zqbench.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from zqbench.errors import TargetError
from zqbench.printable import shown
from zqbench.target import control

READY_POLL_S = 0.25
PROBE_TIMEOUT_S = 2.0  # one readiness probe
TERM_TIMEOUT_S = 30.0  # SIGTERM -> SIGKILL (vLLM's own shutdown takes about 2 s)
KILL_TIMEOUT_S = 10.0
PORT_FREE_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 12
LOG_TAIL_BYTES = 64 * 1024  # read at most this much of the log's end

# Beside the server: reads a pipe whose only writer is zqbench; on EOF (zqbench ended, by
# any means) it ends the server's group as stop() would. Killed by stop() before its pipe
# closes, so it never signals a group id the system has given to someone else since.
GUARD = """\
import os, signal, sys, time
pgid = int(sys.argv[1])
while os.read(0, 4096):
    pass
for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 0.0)):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        break
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            sys.exit(0)
        time.sleep(0.2)
"""


class LaunchError(TargetError):
    """The command did not come to serve; `tail` holds its log's last lines (escaped)."""

    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message)
        self.tail = tail


class ServerExited(LaunchError):
    """The command exited before the target answered."""


class ServerNotReady(LaunchError):
    """The target did not answer within the ready timeout."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The log's last `lines` lines, each escaped and cut (zqbench.printable.shown)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    text = data.decode("utf-8", "replace")
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return [shown(line) for line in kept]


def host_port(base_url: str) -> tuple[str, int]:
    parts = urlsplit(base_url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)


def accepts(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections at host:port now."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group. From /proc, since
    killpg(pgid, 0) counts zombies too (an orphan its container's PID 1 never reaps)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def answers_ready(base_url: str, *, insecure: bool = False) -> bool:
    """GET /health answered 2xx, else GET /v1/models did (a server without /health)."""
    for path in ("/health", "/v1/models"):
        try:
            control.get_text(base_url + path, insecure=insecure, timeout_s=PROBE_TIMEOUT_S)
            return True
        except TargetError:
            continue
    return False


class LaunchedServer:
    """One launch of a server command; `with` starts it and stops it however the block ends."""

    def __init__(
        self,
        argv: Sequence[str],
        base_url: str,
        log_path: Path,
        *,
        ready_timeout_s: float,
        insecure: bool = False,
        term_timeout_s: float = TERM_TIMEOUT_S,
    ) -> None:
        self.argv = list(argv)
        self.base_url = base_url.rstrip("/")
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.insecure = insecure
        self.term_timeout_s = term_timeout_s
        self.ready_s: float | None = None  # launch to the first ready answer
        self.exit_code: int | None = None  # the command's, once stopped or exited
        self._proc: subprocess.Popen[bytes] | None = None
        self._guard: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The command's process id, its group's id too, while it runs."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> LaunchedServer:
        host, port = host_port(self.base_url)
        if accepts(host, port):
            raise TargetError(
                f"{host}:{port} already accepts connections before the server command "
                "started; stop what listens there, or choose another port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: stopped together, by its id
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            except OSError as exc:
                raise ServerExited(
                    f"cannot start the server command {shown(self.argv[0])}: {exc.strerror}", []
                ) from None
        self._guard = subprocess.Popen(
            [sys.executable, "-c", GUARD, str(self._proc.pid)],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C to zqbench's group must not end it first
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._proc is not None
        t0 = time.monotonic()
        while True:
            code = self._proc.poll()
            if code is not None:
                self.exit_code = code
                raise ServerExited(
                    f"the server command exited with code {code} before "
                    f"{self.base_url} answered; see {self.log_path}",
                    log_tail(self.log_path),
                )
            if answers_ready(self.base_url, insecure=self.insecure):
                self.ready_s = time.monotonic() - t0
                return
            if time.monotonic() - t0 > self.ready_timeout_s:
                raise ServerNotReady(
                    f"{self.base_url} did not answer GET /health or /v1/models within "
                    f"{self.ready_timeout_s:g} s of the launch (raise --ready-timeout); "
                    f"see {self.log_path}",
                    log_tail(self.log_path),
                )
            time.sleep(READY_POLL_S)

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after term_timeout_s, then the port free.
        Idempotent; raises TargetError only when the port still answers with the group gone
        (something else serves there, or the command left a daemon behind)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the leader's id is the group's
        try:
            for sig, bound in (
                (signal.SIGTERM, self.term_timeout_s),
                (signal.SIGKILL, KILL_TIMEOUT_S),
            ):
                if proc.poll() is not None and not group_alive(pgid):
                    break
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, sig)
                deadline = time.monotonic() + bound
                while time.monotonic() < deadline:
                    proc.poll()  # reaps the leader, so its zombie leaves the group
                    if proc.returncode is not None and not group_alive(pgid):
                        break
                    time.sleep(0.1)
        finally:
            self.exit_code = proc.poll()
            self._stop_guard()
        self._wait_port_free()

    def _stop_guard(self) -> None:
        guard, self._guard = self._guard, None
        if guard is None:
            return
        guard.kill()  # before its pipe closes: it must never signal a reused group id
        if guard.stdin is not None:
            guard.stdin.close()
        guard.wait(timeout=5)

    def _wait_port_free(self) -> None:
        host, port = host_port(self.base_url)
        deadline = time.monotonic() + PORT_FREE_TIMEOUT_S
        while accepts(host, port, timeout_s=0.5):
            if time.monotonic() > deadline:
                raise TargetError(
                    f"{host}:{port} still accepts connections {PORT_FREE_TIMEOUT_S:g} s after "
                    "the server command's processes ended: something outside its process "
                    "group serves there (a daemon it started?); stop it before the next launch"
                )
            time.sleep(0.1)

    def __enter__(self) -> LaunchedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
