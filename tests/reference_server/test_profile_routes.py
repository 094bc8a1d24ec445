"""POST /start_profile and /stop_profile: a clear 400 without CUDA, never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.reference_server.conftest import Server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)


def test_profile_routes_without_cuda(zq_server: Server) -> None:
    """On the sim engine both switches answer 400 with a message naming the cause, in the
    dialect the request's headers select; GET is 405; /health says not profiling."""
    for path in ("/start_profile", "/stop_profile"):
        r = httpx.post(zq_server.url + path, timeout=10)
        assert r.status_code == 400
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and "CUDA" in err["message"]
        r = httpx.post(zq_server.url + path, headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 400 and r.json()["type"] == "error"
        r = httpx.get(zq_server.url + path, timeout=10)
        assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert httpx.get(zq_server.url + "/health").json()["profiling"] is False


@pytest.mark.slow
def test_torch_cpu_profile_error() -> None:
    """The torch backend on CPU refuses with the same clear error (ValueError -> 400)."""
    pytest.importorskip("torch")
    from reference_server.model.torch_runner import TorchBackend

    backend = TorchBackend(preset="tiny", device="cpu", max_slots=1, max_seq_len=16)
    for switch in (backend.start_profile, backend.stop_profile):
        with pytest.raises(ValueError, match="needs CUDA"):
            switch()


@pytest.mark.slow
def test_torch_profiler_routes(tmp_path: Path) -> None:
    """REFSERVER_TORCH_PROFILER_DIR: the routes drive torch.profiler on CPU, behind the API
    key; the trace holds one range per request named by its x-request-id, and the engine
    thread's ops."""
    pytest.importorskip("torch")
    from tests.reference_server.conftest import start_server

    server = start_server(
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--preset",
        "tiny",
        "--api-key-env",
        "ZQ_KEY",
        env={"ZQ_KEY": "sekrit", "REFSERVER_TORCH_PROFILER_DIR": str(tmp_path)},
    )
    key = {"x-api-key": "sekrit"}
    try:
        assert httpx.post(server.url + "/start_profile", timeout=10).status_code == 401
        r = httpx.post(server.url + "/stop_profile", headers=key, timeout=10)
        assert r.status_code == 400 and "no torch profile is running" in r.text
        assert httpx.post(server.url + "/start_profile", headers=key, timeout=30).status_code == 200
        body = {
            "model": "zq-reference",
            "max_tokens": 4,
            "messages": [{"role": "user", "content": "hello"}],
        }
        for i in range(3):
            r = httpx.post(
                server.url + "/v1/messages",
                json=body,
                timeout=30,
                headers={**key, "anthropic-version": "2023-06-01", "x-request-id": f"zq-{i}"},
            )
            assert r.status_code == 200
        r = httpx.post(server.url + "/stop_profile", headers=key, timeout=60)
        assert r.status_code == 200
        trace = Path(r.json()["trace"])
    finally:
        server.stop()
    assert trace.parent == tmp_path
    events = json.loads(trace.read_text())["traceEvents"]
    names = [e.get("name") for e in events]
    assert sorted(n for n in names if str(n).startswith("request ")) == [
        "request zq-0",
        "request zq-1",
        "request zq-2",
    ]
    assert "aten::mm" in names


def test_a_torch_capture_keeps_only_its_newest_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profiling cycles (any client may run them without --api-key) cannot fill the disk:
    past REFSERVER_TORCH_PROFILER_KEEP, each stop removes this server's oldest trace."""
    pytest.importorskip("torch")
    from reference_server.trace import TorchCapture

    other = tmp_path / "someone-elses.pt.trace.json"
    other.write_text("{}")
    capture = TorchCapture(tmp_path, keep=3)
    written = []
    for _ in range(5):
        capture.start()
        written.append(capture.stop())
    assert sorted(tmp_path.iterdir()) == sorted([*written[2:], other])
    with pytest.raises(ValueError, match="REFSERVER_TORCH_PROFILER_KEEP must be at least 1"):
        TorchCapture(tmp_path, keep=0)
    monkeypatch.setenv("REFSERVER_TORCH_PROFILER_DIR", str(tmp_path))
    monkeypatch.setenv("REFSERVER_TORCH_PROFILER_KEEP", "many")
    with pytest.raises(ValueError, match="must be a whole number, not 'many'"):
        TorchCapture.from_env()
