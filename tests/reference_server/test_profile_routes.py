"""POST /start_profile and /stop_profile: a clear 400 without CUDA, never a 500."""

from __future__ import annotations

import httpx
import pytest

from tests.reference_server.conftest import Server


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
