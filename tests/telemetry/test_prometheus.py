"""PrometheusScraper against an in-test /metrics endpoint and the reference server's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.polling import wait_for
from tests.telemetry.conftest import run_with
from zqbench.errors import OptionError, UsageError
from zqbench.hooks.contract import HookContext
from zqbench.pipeline.hooks import telemetry_hooks
from zqbench.summary import Unavailable
from zqbench.target.embedded import EmbeddedServer, free_port
from zqbench.telemetry import table
from zqbench.telemetry.prometheus import PrometheusScraper, parse
from zqbench.telemetry.table import GPU_TABLE


def exposition(hit: int) -> str:
    """What a DCGM exporter and a vLLM server would show at their `hit`-th scrape."""
    return f"""\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="h"}} 90
DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="h"}} 70
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} {hit % 4}
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{{le="+Inf",model_name="m"}} {2 * hit}
vllm:request_queue_time_seconds_count{{model_name="m"}} {2 * hit}
vllm:request_queue_time_seconds_sum{{model_name="m"}} {0.1 * hit}
# HELP vllm:unrelated_total Something zqbench does not read.
# TYPE vllm:unrelated_total counter
vllm:unrelated_total 5
"""


class _Handler(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = exposition(type(self).hits).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Handler.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), daemon=True
    )  # quick shutdown
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def _ctx(out_dir: Path, start_ns: int) -> HookContext:
    return HookContext("t", out_dir, "http://127.0.0.1:1", "127.0.0.1", 1, start_ns, [])


def test_parse_maps_dcgm_and_vllm_names() -> None:
    found = {(c, lab.get("gpu")): v for c, _, lab, v in parse(exposition(3))}
    assert found[("gpu_util", "0")] == 0.9
    assert found[("gpu_util", "1")] == 0.7
    assert found[("num_requests_waiting", None)] == 3
    assert found[("request_queue_time_seconds_count", None)] == 6
    assert found[("request_queue_time_seconds_sum", None)] == pytest.approx(0.3)
    assert found[("request_queue_time_seconds_bucket", None)] == 6  # le="+Inf", for percentiles
    assert len(found) == 6  # unrelated series are not kept


def test_scrapes_every_250_ms_and_reports_gpu_density_and_queue(
    endpoint: str, tmp_path: Path
) -> None:
    start_ns = time.perf_counter_ns()
    # One request in flight over the whole scrape: every reading counts.
    pd.DataFrame({"t_send": [0], "t_end": [10**10]}).to_parquet(tmp_path / "samples.parquet")
    scraper = PrometheusScraper(endpoint)
    t0 = time.monotonic()
    scraper.start(_ctx(tmp_path, start_ns))
    wait_for(lambda: _Handler.hits >= 5, "5 scrapes")
    result = scraper.stop()
    elapsed = time.monotonic() - t0

    scrapes = result.environment["scrapes"]
    # Never more often than every 250 ms (a late scrape skips the slots it missed), plus
    # the one stop() adds.
    assert 5 <= scrapes <= elapsed / 0.25 + 2, f"{scrapes} scrapes in {elapsed:.3f} s"
    assert result.environment["failed_scrapes"] == 0
    assert result.telemetry["gpu_density"] == pytest.approx(0.8)  # mean of 0.9 and 0.7
    assert result.telemetry["server_requests_waiting_max"] == 3
    assert result.telemetry["server_queue_time_mean_s"] == pytest.approx(0.05)
    assert result.notes == []

    gpu = pd.read_parquet(tmp_path / GPU_TABLE)
    assert sorted(gpu["gpu"].unique()) == [0, 1]
    assert set(gpu["source"]) == {"prometheus"}
    long = pd.read_parquet(tmp_path / table.PROMETHEUS_TABLE)
    assert set(long["source_metric"]) >= {"DCGM_FI_DEV_GPU_UTIL", "vllm:num_requests_waiting"}
    # The scrape stop() adds at the end comes when the run ends, not on the 250 ms grid.
    ts = sorted(long["t_epoch_ns"].unique())[:-1]
    gaps = np.diff(ts) / 1e9
    assert np.median(gaps) == pytest.approx(0.25, abs=0.025), f"gaps {np.round(gaps, 4)}"


def test_unreachable_endpoint_is_reported_not_fatal(tmp_path: Path) -> None:
    scraper = PrometheusScraper(f"http://127.0.0.1:{free_port()}/metrics", timeout_s=0.5)
    scraper.start(_ctx(tmp_path, time.perf_counter_ns()))
    result = scraper.stop()  # which scrapes once more: at least one failure, however early
    assert result.environment["scrapes"] == 0 and result.environment["failed_scrapes"] >= 1
    assert "gpu_density" not in result.telemetry  # unavailable, not 0
    assert any("scrapes" in n and "failed" in n for n in result.notes)
    assert any(n.startswith("gpu_density unavailable") for n in result.notes)


@pytest.mark.slow
def test_reference_server_metrics_during_a_run(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    """refserver_* names: a zero-queue server never has a request waiting."""
    scraper = PrometheusScraper(ref_server.base_url + "/metrics")
    result = run_with([scraper], ref_server, tmp_path)
    env = result.summary.environment["prometheus"]
    assert env["scrapes"] >= 6 and env["failed_scrapes"] == 0
    assert "refserver_num_requests_waiting" in env["metrics"]
    telemetry = result.summary.telemetry
    assert telemetry["server_requests_waiting_max"] == 0.0
    assert "gpu_density" not in telemetry  # no DCGM: unavailable
    print(telemetry)


def test_telemetry_hooks_builds_one_scraper_per_source_and_rejects_others(endpoint: str) -> None:
    hooks = telemetry_hooks([f"prometheus:{endpoint}", "prometheus:http://h:9400/metrics"], "")
    assert [h.name for h in hooks] == ["prometheus", "prometheus"]
    with pytest.raises(OptionError, match=r"^telemetry 'gpu': expected nvml, auto"):
        telemetry_hooks(["gpu"], "")
    with pytest.raises(UsageError, match="http"):
        telemetry_hooks(["prometheus:ftp://x"], "")
    assert telemetry_hooks([], "127.0.0.1") == []


UNKNOWN_ENGINE = """\
# HELP myengine_queue_depth Requests waiting.
# TYPE myengine_queue_depth gauge
myengine_queue_depth 7
# HELP myengine_active Requests computing.
# TYPE myengine_active gauge
myengine_active 2
"""


class _UnknownEngine(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = UNKNOWN_ENGINE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_explicit_source_of_no_known_engine_says_why_and_writes_no_empty_table(
    tmp_path: Path,
) -> None:
    """`--telemetry prometheus:URL` on series zqbench does not know: summary.json keeps its
    contract (`server_queue: {"unavailable": ...}`), and no empty parquet is left."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _UnknownEngine)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        scraper = PrometheusScraper(url)
        scraper.start(_ctx(tmp_path, time.perf_counter_ns()))
        result = scraper.stop()  # one scrape at least: stop() takes the last word
    finally:
        server.shutdown()
        server.server_close()
    assert result.environment["scrapes"] >= 1 and result.environment["failed_scrapes"] == 0
    assert result.server_queue == Unavailable(unavailable=f"no known engine's series at {url}")
    assert not (tmp_path / table.PROMETHEUS_TABLE).exists()
    assert result.environment["metrics"] == []
