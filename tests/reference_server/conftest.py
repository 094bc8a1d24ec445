"""Real reference servers on loopback, started as subprocesses and stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = "zq-reference"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    args: tuple[str, ...]

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode


def start_server(*args: str, env: dict[str, str] | None = None, wait_s: float = 60.0) -> Server:
    """Start `python -m reference_server ARGS` on a free port; wait until /health answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "reference_server", "--port", str(port), *args]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    server = Server(url, proc, tuple(args))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            server.stop()
            raise RuntimeError(f"server exited with {proc.returncode}: {err}")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    server.stop()
    raise RuntimeError("server did not answer /health in time")


@pytest.fixture(scope="module", params=["zero-queue", "fifo"])
def sim_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A sim-engine server, once per scheduler."""
    server = start_server("--engine", "sim", "--scheduler", request.param, "--max-batch-size", "4")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def zq_server() -> Iterator[Server]:
    server = start_server(
        "--engine", "sim", "--scheduler", "zero-queue", "--max-batch-size", "4",
        "--max-context", "512", "--max-tokens-limit", "256", "--body-limit", "65536",
        "--no-sdk-retry",
    )  # fmt: skip
    yield server
    server.stop()
