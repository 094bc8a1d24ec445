"""The reference server's /metrics carries the zero-queue dimensions: time-to-reject,
dispatch jitter, running against the slots, and GPU density (absent, never 0, on CPU)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from zqbench.target.embedded import EmbeddedServer

BODY = {"model": "zq-reference", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def test_refusals_jitter_slots_and_an_absent_gpu(tmp_path: Path) -> None:
    with EmbeddedServer(
        engine="sim", scheduler="zero-queue", max_batch_size=2, log_path=tmp_path / "log"
    ) as server:
        url = server.base_url
        with ThreadPoolExecutor(8) as pool:
            codes = list(
                pool.map(
                    lambda _: httpx.post(f"{url}/v1/messages", json=BODY, timeout=10).status_code,
                    range(16),
                )
            )
        health = httpx.get(f"{url}/health").json()
        text = httpx.get(f"{url}/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    refused = codes.count(529)
    assert refused > 0 and codes.count(200) + refused == 16
    assert samples[("refserver_time_to_reject_seconds_count", ())] == refused
    # Refused in the handler, at once: well under a decode step.
    assert samples[("refserver_time_to_reject_seconds_sum", ())] / refused < 0.05
    jitter = samples[("refserver_dispatch_jitter_seconds", ())]
    assert jitter * 1e6 == pytest.approx(health["dispatch_jitter_us"], abs=0.01)  # rounded
    assert samples[("refserver_num_slots", ())] == 2
    assert samples[("refserver_num_requests_running", ())] == 0
    reason = "no GPU: the engine runs on sim"
    assert samples[("refserver_gpu_telemetry_available", (("reason", reason),))] == 0
    assert not any(name == "refserver_gpu_utilization_density" for name, _ in samples)
