"""A request class's own headers reach the server on that class's requests only: the
reference server counts the low-latency prefills X-Stream-Mode asked for, and they are
exactly the `ll` class's admitted requests."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL, write_scenario
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer

SCENARIO = """
name = "class-headers"
api = "anthropic"
[validity]
max_schedule_lag = "500ms"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "2s"
[request]
max_tokens = 4
[[request.mix]]
name = "ll"
weight = 1
prompt_tokens = 16
headers = { "X-Stream-Mode" = "low-latency" }
[[request.mix]]
name = "plain"
weight = 1
prompt_tokens = 16
"""
COUNT = re.compile(r'^refserver_prefill_group_size_count\{profile="low-latency"\} (\S+)$', re.M)
pytestmark = pytest.mark.slow


def _low_latency_prefills(server: EmbeddedServer) -> float:
    found = COUNT.search(httpx.get(server.base_url + "/metrics").text)
    return 0.0 if found is None else float(found.group(1))


def test_only_the_class_with_the_header_is_prefilled_low_latency(
    tmp_path: Path, ref_server: EmbeddedServer
) -> None:
    before = _low_latency_prefills(ref_server)
    result = run_scenario(
        RunOptions.of(
            scenario=str(write_scenario(tmp_path, SCENARIO)),
            target=ref_server.base_url,
            model=MODEL,
            out=tmp_path / "run",
            calibration="off",
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )
    rows = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    ll = [r for r in rows if r["request_class"] == "ll" and r["status"] == 200]
    plain = [r for r in rows if r["request_class"] == "plain" and r["status"] == 200]
    assert ll and plain
    assert _low_latency_prefills(ref_server) - before == len(ll)
