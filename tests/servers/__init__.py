"""Loopback test servers with programmed latency and server-side ground truth.

`ProgrammedServer` runs `tests/servers/programmed.py` in its own process (started and stopped
by PID) so the client under test owns its CPU and event loop; see that module's docstring for
the paths it serves. Pytest fixtures live in `tests.servers.fixtures`; import them in a
conftest (`from tests.servers.fixtures import programmed_server  # noqa: F401`) or list
`pytest_plugins = ["tests.servers.fixtures"]` in the root conftest.

    with ProgrammedServer() as srv:            # or the `programmed_server` fixture
        url = srv.url + "/sse?n=10&every=5"    # HTTP/1.1 and h2c (prior knowledge) on one port
        ...
        truth = srv.truth("req-7")             # {"t_recv": ns, "t_head": ns, "t_chunks": [...]}
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


class ProgrammedServer:
    """Handle on one server process. Ground truth is read back over HTTP (`/_truth`)."""

    def __init__(self, *, tls: tuple[str, str] | None = None, start_timeout_s: float = 15.0):
        self.tls = tls  # (certfile, keyfile): serve TLS with ALPN h2/http1.1
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> ProgrammedServer:
        cmd = [sys.executable, "-m", "tests.servers.programmed", "--port", "0"]
        if self.tls:
            cmd += ["--cert", self.tls[0], "--key", self.tls[1]]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.start_timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"programmed server did not start: {line!r}")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                line += os.read(self.proc.stdout.fileno(), 64)
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()  # by PID, this process only
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> ProgrammedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ground truth (plain HTTP/1.1 over a fresh connection, so it never touches the pool
    #    of the client under test)
    def _control(self, path: str) -> Any:
        if self.tls:
            import ssl

            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            handler = urllib.request.HTTPSHandler(context=ctx)
            opener = urllib.request.build_opener(handler)
        else:
            opener = urllib.request.build_opener()
        with opener.open(self.url + path, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def truth(self, req_id: str) -> dict[str, Any] | None:
        """Ground truth of one request (None if the server never saw that `x-req-id`)."""
        return self._control(f"/_truth?id={req_id}")["request"]

    def all_truth(self) -> dict[str, Any]:
        """`{"conns": n, "requests": n, "truth": {req_id: {...}}}` (control calls excluded
        from `requests`, but their own connection counts in `conns`)."""
        return self._control("/_truth")

    def reset(self) -> None:
        """Forget all ground truth and zero the counters."""
        self._control("/_reset")

    def stall(self, ms: float) -> None:
        """Hold every response write on the server for `ms` from now."""
        self._control(f"/_stall?ms={ms}")


class RecordingSink:
    """A `ResponseSink` that keeps every event with its stamp (for tests)."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.t_headers = 0
        self.chunks: list[tuple[int, bytes]] = []  # (t_ns, data)
        self.t_end = 0

    def on_headers(self, status: int, headers: Any, t_ns: int) -> None:
        self.status, self.headers, self.t_headers = status, dict(headers), t_ns

    def on_data(self, data: bytes, t_ns: int) -> None:
        self.chunks.append((t_ns, bytes(data)))

    def on_end(self, t_ns: int) -> None:
        self.t_end = t_ns

    @property
    def body(self) -> bytes:
        return b"".join(d for _, d in self.chunks)

    def time_of_byte(self, offset: int) -> int:
        """Client stamp of the chunk that held body byte number `offset` (0-based)."""
        seen = 0
        for t, d in self.chunks:
            seen += len(d)
            if offset < seen:
                return t
        raise IndexError(offset)


def free_port() -> int:
    """A port with nothing listening on it (for connection-refused tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_self_signed_cert(folder: Path) -> tuple[str, str]:
    """A throwaway EC certificate for localhost/127.0.0.1 (needs the openssl CLI)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", "/CN=localhost",
            "-keyout", str(key), "-out", str(cert),
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)
