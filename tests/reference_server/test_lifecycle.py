"""Process behaviour: --help, startup line, SIGTERM drains in-flight requests then exits."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.polling import wait_for
from tests.reference_server.conftest import MODEL, ROOT, free_port, start_server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)


def test_help_works() -> None:
    out = subprocess.run([sys.executable, "-m", "reference_server", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0 and "--scheduler" in out.stdout


def test_bad_config_exits_2() -> None:
    out = subprocess.run([sys.executable, "-m", "reference_server", "--max-batch-size", "0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "max_batch_size" in out.stderr


def test_sigterm_drains_in_flight_then_exits() -> None:
    """A request running when SIGTERM arrives completes; new ones are refused; exit 0."""
    server = start_server("--engine", "sim", "--drain-timeout", "10")
    result: dict[str, object] = {}

    def long_request() -> None:
        r = httpx.post(
            server.url + "/v1/messages",
            timeout=30,
            json={
                "model": MODEL,
                "max_tokens": 300,
                "messages": [{"role": "user", "content": "x"}],
            },
        )
        result["status"] = r.status_code
        result["tokens"] = r.json()["usage"]["output_tokens"]

    def running() -> bool:
        text = httpx.get(server.url + "/metrics", timeout=5).text
        return "\nrefserver_num_requests_running 1.0" in text

    t = threading.Thread(target=long_request)
    t.start()
    # SIGTERM once the request holds its slot (300 tokens then take ~0.5 s in the sim).
    wait_for(running, "the long request running", every_s=0.005)
    server.proc.terminate()
    time.sleep(0.05)
    try:
        r = httpx.post(
            server.url + "/v1/messages",
            timeout=5,
            json={"model": MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]},
        )
        assert r.status_code == 529  # refused while draining
    except httpx.TransportError:
        pass  # or the listener is already closed
    t.join(30)
    assert result == {"status": 200, "tokens": 300}
    assert server.proc.wait(15) == 0
    assert b"listening on" in (server.proc.stdout.read() if server.proc.stdout else b"")
    server.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a certificate")
def test_tls_negotiates_http2_by_alpn(tmp_path: Path) -> None:
    """Given a certificate, the server speaks TLS and negotiates HTTP/2 through ALPN."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    port = free_port()
    args = ["--engine", "sim", "--port", str(port), "--ssl-cert", str(cert), "--ssl-key", str(key)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "reference_server", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(http2=True, verify=False, timeout=2) as client:
            for _ in range(200):  # bounded: about 20 s
                try:
                    r = client.get(f"https://127.0.0.1:{port}/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            assert r.status_code == 200 and r.http_version == "HTTP/2"
    finally:
        proc.terminate()
        proc.wait(15)
