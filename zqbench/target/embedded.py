"""The embedded default target: the bundled reference server, started as a subprocess.

zqbench never imports `reference_server`; it starts the server's program (what
`python -m reference_server` runs) on a free loopback port, waits for `GET /health`
(through the control-plane client), and stops it by PID afterwards. The server also dies
with this process, however it ends (see `EXIT_WITH_PARENT`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from zqbench.errors import TargetError
from zqbench.target import control

# `python -m reference_server ARGS`, plus a thread that reads the server's stdin: a pipe
# whose only writer is the process that started it. When that process ends by any means,
# SIGKILL included, the kernel closes the writer, the read returns EOF and the server
# exits at once: nobody is left to wait for a graceful drain. A pipe rather than Linux's
# PR_SET_PDEATHSIG, which fires when the *thread* that started the child ends, and would
# need a preexec_fn, unsafe in a process with threads; rather than polling getppid(), it
# costs the measured server no wake-ups.
EXIT_WITH_PARENT = """\
import os, runpy, threading

def exit_with_parent():
    while os.read(0, 4096):
        pass
    os._exit(1)

threading.Thread(target=exit_with_parent, name="exit-with-parent", daemon=True).start()
runpy.run_module("reference_server", run_name="__main__", alter_sys=True)
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def get_health(
    base_url: str, timeout_s: float = 1.0, *, insecure: bool = False
) -> dict[str, object]:
    """The target's `GET /health` JSON object; TargetError (a ControlError) otherwise."""
    url = base_url + "/health"
    health = control.get_json(url, insecure=insecure, timeout_s=timeout_s)
    if not isinstance(health, dict):
        raise control.ControlError("GET", url, "the answer is not a JSON object", "bad_json")
    return health


@dataclass
class EmbeddedServer:
    """`with EmbeddedServer(...) as srv:` -> `srv.base_url` answers until the block ends."""

    engine: str = "auto"
    scheduler: str = "zero-queue"
    max_batch_size: int | None = None
    extra_args: tuple[str, ...] = ()
    log_path: Path | None = None
    startup_timeout_s: float = 120.0
    host: str = "127.0.0.1"
    port: int = 0
    health: dict[str, object] = field(default_factory=dict)
    # Give the server the last CPU and this process the others, so the load generator's
    # timing is not at the mercy of the model's compute (Linux, 2 CPUs or more).
    pin_cpus: bool = False
    # `zqbench profile`: a profiler's command line the server runs under (nsys, ncu), and
    # variables for its environment (the torch profiler's trace folder).
    wrap: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    _proc: subprocess.Popen[bytes] | None = None
    _log: object = None
    _own_affinity: set[int] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (a benchmark reads its CPU time)."""
        return None if self._proc is None else self._proc.pid

    def command(self) -> list[str]:
        cmd = [*self.wrap, sys.executable, "-c", EXIT_WITH_PARENT]
        cmd += ["--host", self.host, "--port", str(self.port)]
        cmd += ["--engine", self.engine, "--scheduler", self.scheduler]
        if self.max_batch_size is not None:
            cmd += ["--max-batch-size", str(self.max_batch_size)]
        return cmd + list(self.extra_args)

    def start(self) -> EmbeddedServer:
        if not self.port:
            self.port = free_port(self.host)
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **dict(self.env)}
        # stdin stays open, never written: its EOF is the server's signal that we died.
        self._proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env
        )
        if self.pin_cpus:
            self._pin(self._proc.pid)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self.stop()  # releases its pipe, its log and our CPUs
                where = f"; see {self.log_path}" if self.log_path else ""
                raise TargetError(
                    f"the embedded reference server exited with code {code} during startup{where}"
                )
            try:
                self.health = get_health(self.base_url)
                return self
            except TargetError:  # not listening yet, or not answering yet
                time.sleep(0.1)
        self.stop()
        raise TargetError(
            f"the embedded reference server did not answer {self.base_url}/health within "
            f"{self.startup_timeout_s:.0f} s; pass --target URL to use another server"
        )

    def _pin(self, server_pid: int) -> None:
        if not hasattr(os, "sched_setaffinity"):
            return
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return
        try:
            os.sched_setaffinity(server_pid, {cpus[-1]})  # its threads inherit it
            self._own_affinity = set(cpus)
            os.sched_setaffinity(0, set(cpus[:-1]))
        except OSError:  # a container may forbid it; the run still works, only noisier
            self._own_affinity = None

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._own_affinity is not None:
            os.sched_setaffinity(0, self._own_affinity)
            self._own_affinity = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # drains in-flight requests, then exits
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc is not None and proc.stdin is not None:
            proc.stdin.close()  # only now: closing it earlier would kill the server undrained
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()  # type: ignore[attr-defined]
            self._log = None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()  # whatever happened inside the block: the server never outlives it
