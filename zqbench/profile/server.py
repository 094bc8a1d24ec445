"""A user's server command (after `--`), started under the profiler, stopped by its PID.

Nothing may listen at `--target URL` before it starts (that server's answers would pass for
this one's). It must come to serve its /health within the startup timeout; it is stopped
with SIGTERM (a profiler forwards it, then writes its report), then SIGKILL after a grace.
Its output goes to server.log in the run folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from zqbench.errors import TargetError
from zqbench.target.embedded import get_health
from zqbench.target.launched import accepts, host_port

STARTUP_TIMEOUT_S = 300.0  # a real engine under nsys loads its model slowly
STOP_TIMEOUT_S = 120.0  # nsys writes its report after the server exits


class UserServer:
    def __init__(
        self,
        command: Sequence[str],
        base_url: str,
        *,
        env: Sequence[tuple[str, str]] = (),
        log_path: Path,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.command = list(command)
        self.base_url = base_url.rstrip("/")
        self.env = {**os.environ, **dict(env)}
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> UserServer:
        # Another server's /health would pass for this one's, and the profile would be of
        # a process the profiler never started.
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
                    self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env
                )
            except OSError as exc:
                raise TargetError(f"cannot start the server command: {exc}") from None
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                raise TargetError(
                    f"the server command exited with code {code} during startup; "
                    f"see {self.log_path}"
                )
            try:
                get_health(self.base_url)
                return
            except TargetError:
                time.sleep(0.2)
        self.stop()
        raise TargetError(
            f"the server command did not answer {self.base_url}/health within "
            f"{self.startup_timeout_s:.0f} s; check --target and {self.log_path}"
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
