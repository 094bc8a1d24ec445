"""A server under test in a process group of its own, ended by that group's id.

    server = start_in_group(["bash", "serve.sh", str(port)], port, log_path, name="vLLM",
                            model="tiny")
    try:
        ... server.base_url ...
    finally:
        server.stop()

Standard library only, so that it imports from the repository's own venv whatever venv the
server runs in. The server gets a session (and process group) of its own, and stop() signals
that group by its id: the server and every process it started go together, and nothing is ever
killed by name. A guard process ends the group if the test process dies without a teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import pytest

from zqbench.target.launched import GUARD, group_alive


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


# The guard and the group check are the library's (zqbench.target.launched, which launches
# `sweep --server-cmd`'s servers): a guard beside the server reads a pipe whose only writer is
# this test process, and on EOF (this process ended, SIGKILL included: no fixture teardown
# ran) ends the server's group with SIGTERM, then SIGKILL, as stop() would.


class GroupServer:
    """A running server: its URL and its process group, which stop() ends."""

    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, log_path: Path, *, model: str
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        # start_new_session=True made the server a group leader: its pgid is its pid.
        self.pgid = os.getpgid(proc.pid)
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.model = model
        self.log_path = log_path
        self.started_s: float | None = None  # spawn to first healthy answer
        self.guard = subprocess.Popen(
            [sys.executable, "-c", GUARD, str(self.pgid)],
            stdin=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C to the tests' group must not end it first
        )

    def healthy(self, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=timeout) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, term_timeout: float = 20.0, kill_timeout: float = 5.0) -> int | None:
        """SIGTERM to the process group, SIGKILL to it after term_timeout; the exit status.

        Idempotent.
        """
        for sig, bound in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
            if not group_alive(self.pgid) and self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, sig)
            deadline = time.monotonic() + bound
            while time.monotonic() < deadline:
                self.proc.poll()  # reaps the leader, so that its zombie leaves the group
                if self.proc.returncode is not None and not group_alive(self.pgid):
                    break
                time.sleep(0.1)
        self._stop_guard()
        return self.proc.poll()

    def _stop_guard(self) -> None:
        """The group is gone: the guard has nothing left to end (its pipe closed, it exits)."""
        if self.guard.stdin is not None and not self.guard.stdin.closed:
            self.guard.kill()  # before the EOF, so it never signals a reused group id
            self.guard.stdin.close()
        self.guard.wait(timeout=5)

    def __enter__(self) -> GroupServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_in_group(
    argv: Sequence[str],
    port: int,
    log_path: str | os.PathLike[str],
    *,
    name: str,
    model: str,
    deadline_s: float = 180.0,
    server_class: type[GroupServer] = GroupServer,
) -> GroupServer:
    """Start argv (which serves 127.0.0.1:port) and return once GET /health answers 200.

    Its stdout and stderr go to log_path. Raises RuntimeError when the port is taken or the
    server exits early, TimeoutError past deadline_s; on any failure the server is stopped first.
    """
    if not port_is_free(port):
        # Another server's /health would pass for this one's.
        raise RuntimeError(f"127.0.0.1:{port} is already in use")
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = server_class(proc, port, log, model=model)
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode} before it was healthy; "
                    f"log {log}:\n{log_tail(log)}"
                )
            if server.healthy():
                server.started_s = time.monotonic() - t0
                return server
            if time.monotonic() - t0 > deadline_s:
                raise TimeoutError(
                    f"{name} not healthy after {deadline_s:.0f} s; log {log}:\n{log_tail(log)}"
                )
            time.sleep(0.25)
    except BaseException:
        server.stop()
        raise


def need_engine(name: str, reason: str | None) -> None:
    """Go on when a third-party engine can run here (`reason` None); else skip with the
    reason, or under CI=true fail: CI must prove zqbench against the real engine."""
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the {name} end-to-end tests: {reason}")
    pytest.skip(reason)
