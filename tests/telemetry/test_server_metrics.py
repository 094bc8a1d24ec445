"""The target's own metrics, found and scraped by default: a loopback fake engine serves
OpenAI chat completions and a /metrics whose gauges and queue-time histogram change from
one scrape to the next, as vLLM's (or SGLang's, TGI's) would during a burst."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.polling import wait_for
from tests.servers.in_thread import serve
from zqbench.cli import app
from zqbench.metrics.sections.prefix_cache import prefix_cache_rows
from zqbench.pipeline.hooks import ServerMetrics
from zqbench.pipeline.run import RunOptions, RunResult, run_scenario
from zqbench.saved.report import rerender_run
from zqbench.summary import (
    CacheCounters,
    CachedUsage,
    CacheHitRate,
    PrefixCache,
    QueueSeries,
    QueueTime,
    Rejections,
    ServerQueue,
    Summary,
    Unavailable,
)
from zqbench.target.embedded import free_port
from zqbench.telemetry import table
from zqbench.telemetry.discovery import discover, metrics_url
from zqbench.telemetry.engines import ENGINES, Engine
from zqbench.telemetry.prometheus import PrometheusScraper
from zqbench.telemetry.server_queue import bucket_bound, queue_time


def engine_of(key: str) -> Engine:
    return next(e for e in ENGINES if e.key == key)


SCENARIO = """
name = "queue"
description = "2 s at 10 req/s, OpenAI, not streamed"
api = "openai"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "2s"
[request]
max_tokens = 4
prompt_tokens = 16
stream = false
"""

# vLLM's queue-time histogram before the run (it already counted 15 requests) and after
# it: bound -> cumulative count. The run's growth per bucket is 10, 30, 50, 78, 93, 100, 100.
BEFORE = {"0.1": 5, "0.5": 8, "1.0": 10, "2.5": 12, "5.0": 15, "10.0": 15, "+Inf": 15}
GROWTH = {"0.1": 10, "0.5": 30, "1.0": 50, "2.5": 78, "5.0": 93, "10.0": 100, "+Inf": 100}
AFTER = {le: BEFORE[le] + GROWTH[le] for le in BEFORE}
SUM_BEFORE, SUM_GROWTH = 20.0, 520.0  # mean queue time over the run: 520 / 100 = 5.2 s
# Ground truth, by hand from GROWTH: each percentile is at most its bucket's upper bound.
#   p50: rank 50 falls in (0.5, 1.0] (30 below, 50 at its top):  <= 1.0
#   p90: rank 90 falls in (2.5, 5.0] (78 below, 93 at its top):  <= 5.0
#   p99: rank 99 falls in (5.0, 10.0] (93 below, 100 at its top): <= 10.0
P50, P90, P99 = 1.0, 5.0, 10.0
# requests waiting at the n-th GET of /metrics (1: discovery, 2: the first scrape, ...)
WAITING = [0, 0, 5, 118, 60, 3]


def vllm_text(hit: int) -> str:
    """vLLM's exposition at the `hit`-th GET: the histogram grows once, after the first scrape."""
    buckets, total = (BEFORE, SUM_BEFORE) if hit <= 2 else (AFTER, SUM_BEFORE + SUM_GROWTH)
    waiting = WAITING[min(hit, len(WAITING)) - 1]
    queries, hits = (1000, 200) if hit <= 2 else (5000, 3200)
    # Admission control's refusals, by reason: 40 and 3 during the run, 7 before it.
    full, tokens = (7, 0) if hit <= 2 else (47, 3)
    lines = [
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}',
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{engine="0",model_name="m"}} {min(hit, 8)}',
        "# TYPE vllm:request_queue_time_seconds histogram",
        *(
            f'vllm:request_queue_time_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {n}'
            for le, n in buckets.items()
        ),
        f'vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {total}',
        f'vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {buckets["+Inf"]}',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
        # The prefix cache: 4000 prompt tokens looked up during the run, 3000 found.
        "# TYPE vllm:prefix_cache_queries counter",
        f'vllm:prefix_cache_queries_total{{engine="0",model_name="m"}} {queries}',
        "# TYPE vllm:prefix_cache_hits counter",
        f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {hits}',
        "# TYPE vllm:admission_rejections counter",
        *(
            f'vllm:admission_rejections_total{{model_name="m",reason="{reason}"}} {n}'
            for reason, n in (("max_num_queued_reqs", full), ("max_num_queued_tokens", tokens))
        ),
    ]
    return "\n".join(lines) + "\n"


SGLANG = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 4.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 7.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 1.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2.0
sglang:time_to_first_token_seconds_sum{model_name="m"} 0.3
sglang:time_to_first_token_seconds_count{model_name="m"} 2.0
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.375
"""

TGI = """\
# TYPE tgi_queue_size gauge
tgi_queue_size 9
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 2
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.5"} 3
tgi_request_queue_duration_bucket{le="1"} 4
tgi_request_queue_duration_bucket{le="+Inf"} 4
tgi_request_queue_duration_sum 1.5
tgi_request_queue_duration_count 4
"""

LLAMACPP = """\
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 28
"""

# LMDeploy v0.16.0 (lmdeploy/metrics/loggers.py): labels model_name and engine (the DP rank).
LMDEPLOY = """\
# HELP lmdeploy:num_requests_running Number of requests in model execution batches.
# TYPE lmdeploy:num_requests_running gauge
lmdeploy:num_requests_running{engine="0",model_name="m"} 3.0
# HELP lmdeploy:num_requests_waiting Number of requests waiting to be processed.
# TYPE lmdeploy:num_requests_waiting gauge
lmdeploy:num_requests_waiting{engine="0",model_name="m"} 5.0
# HELP lmdeploy:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE lmdeploy:request_queue_time_seconds histogram
lmdeploy:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
lmdeploy:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
lmdeploy:request_queue_time_seconds_sum{engine="0",model_name="m"} 0.9
lmdeploy:request_queue_time_seconds_count{engine="0",model_name="m"} 2.0
"""

# trtllm-serve's /prometheus/metrics (tensorrt_llm/metrics/collector.py, prefix trtllm_).
TRTLLM = """\
# HELP trtllm_num_requests_running Number of active requests
# TYPE trtllm_num_requests_running gauge
trtllm_num_requests_running{model_name="m"} 6.0
# HELP trtllm_num_requests_waiting Number of queued requests
# TYPE trtllm_num_requests_waiting gauge
trtllm_num_requests_waiting{model_name="m"} 11.0
# HELP trtllm_max_num_active_requests Maximum number of active requests
# TYPE trtllm_max_num_active_requests gauge
trtllm_max_num_active_requests{model_name="m"} 64.0
"""

DCGM = """\
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0"} 55
"""

COMPLETION = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "a b c d"},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 16,
            "completion_tokens": 4,
            "total_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 12},
        },
    }
).encode()


class FakeEngine(BaseHTTPRequestHandler):
    """An OpenAI-compatible engine whose /metrics is `metrics`: vllm, sglang, tgi, dcgm (no
    engine's series), 404, or html (not Prometheus text)."""

    protocol_version = "HTTP/1.1"
    metrics = "vllm"
    metric_gets = 0
    lock = threading.Lock()

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self._send(404, b"", "text/plain")
            return
        with self.lock:
            type(self).metric_gets += 1
            hit = self.metric_gets
        kind = type(self).metrics
        if kind == "404":
            self._send(404, b'{"detail":"Not Found"}', "application/json")
        elif kind == "html":
            self._send(200, b"<html><body>metrics</body></html>", "text/html")
        else:
            text = {
                "vllm": vllm_text(hit),
                "sglang": SGLANG,
                "tgi": TGI,
                "dcgm": DCGM,
                "llamacpp": LLAMACPP,
                "lmdeploy": LMDEPLOY,
                "trtllm": TRTLLM,
            }[kind]
            self._send(200, text.encode(), "text/plain; version=0.0.4")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(200, COMPLETION, "application/json")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def engine_server() -> Iterator[str]:
    with serve(FakeEngine) as url:
        yield url


@pytest.fixture
def engine(engine_server: str) -> Iterator[str]:
    """The fake engine serving vLLM's metrics, its GET count at 0."""
    FakeEngine.metrics, FakeEngine.metric_gets = "vllm", 0
    yield engine_server
    FakeEngine.metrics = "vllm"


def run_against(url: str, tmp_path: Path, **options: object) -> RunResult:
    scenario = tmp_path / "queue.toml"
    scenario.write_text(SCENARIO)
    return run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=url,
            model="m",
            calibration="off",
            out=tmp_path / "run",
            **options,  # type: ignore[arg-type]
        )
    )


# ------------------------------------------------------------------ the histogram's quantiles


def test_a_percentile_is_its_buckets_upper_bound() -> None:
    growth = [(float(le), float(n)) for le, n in GROWTH.items()]
    assert (bucket_bound(0.5, growth), bucket_bound(0.9, growth)) == (P50, P90)
    assert bucket_bound(0.99, growth) == P99
    # vLLM's first bucket ends at 0.3 s: requests that never queued are "at most 0.3 s",
    # never the 0.15 s that interpolating inside the bucket would invent.
    never_queued = [(0.3, 100.0), (0.5, 100.0), (float("inf"), 100.0)]
    assert bucket_bound(0.5, never_queued) == 0.3
    tail = [(1.0, 10.0), (float("inf"), 20.0)]
    assert bucket_bound(0.99, tail) == float("inf")  # past the largest finite bound
    assert bucket_bound(0.5, [(1.0, 0.0), (float("inf"), 0.0)]) is None  # nothing counted
    assert bucket_bound(0.5, [(1.0, 3.0)]) is None  # no +Inf bucket: not a histogram


def test_queue_time_adds_series_and_counts_a_series_born_mid_run_from_zero() -> None:
    """Two models' series add up per bound; the second appears only at the last scrape."""
    rows = []
    for t, series in ((1, {"a": (2, 4)}), (2, {"a": (5, 6), "b": (1, 2)})):
        for model, (le1, inf) in series.items():
            for le, n in (("1.0", le1), ("+Inf", inf)):
                labels = json.dumps({"le": le, "model_name": model}, sort_keys=True)
                rows.append((t, "request_queue_time_seconds_bucket", labels, n))
            labels = json.dumps({"model_name": model})
            rows.append((t, "request_queue_time_seconds_count", labels, inf))
            rows.append((t, "request_queue_time_seconds_sum", labels, 0.5 * inf))
    frame = pd.DataFrame(rows, columns=["t_epoch_ns", "metric", "labels", "value"])

    result = queue_time(frame, [1, 2], engine_of("vllm"))
    assert isinstance(result, QueueTime)
    # growth: le=1.0 (5 - 2) + 1 = 4 of +Inf (6 - 4) + 2 = 4; sum (3 - 2) + 1 = 2
    assert result.count == 4 and result.mean == pytest.approx(0.5)
    assert result.p50 == 1.0  # rank 2 of 4, all in (0, 1]: at most 1 s


# ------------------------------------------------------------------ discovery


@pytest.mark.parametrize(
    ("kind", "key", "waiting"),
    [("vllm", "vllm", "vllm:num_requests_waiting"), ("sglang", "sglang", "sglang:num_queue_reqs"),
     ("tgi", "tgi", "tgi_queue_size"), ("llamacpp", "llamacpp", "llamacpp:requests_deferred"),
     ("lmdeploy", "lmdeploy", "lmdeploy:num_requests_waiting"),
     ("trtllm", "trtllm", "trtllm_num_requests_waiting")],
)  # fmt: skip
def test_discover_recognises_each_engine(engine: str, kind: str, key: str, waiting: str) -> None:
    FakeEngine.metrics = kind
    found = discover(engine + "/some/prefix")  # the origin's /metrics, the prefix dropped
    assert found.url == engine + "/metrics"
    assert found.engine is not None and found.engine.key == key
    assert found.engine.waiting == waiting and found.reason == ""
    assert FakeEngine.metric_gets == 1


@pytest.mark.parametrize(
    ("names", "key"),
    [
        ({"lmdeploy:num_requests_waiting", "lmdeploy:num_requests_running"}, "lmdeploy"),
        ({"trtllm_num_requests_waiting", "trtllm_num_requests_running"}, "trtllm"),
        ({"trtllm_num_requests_running", "trtllm_max_num_active_requests"}, "trtllm"),
        ({"sglang:num_queue_reqs", "sglang:num_running_reqs"}, "sglang"),  # current names
    ],
)
def test_recognise_the_added_engines_from_their_gauge_names(names: set[str], key: str) -> None:
    """A scrape's sample names with LMDeploy's or TensorRT-LLM's gauges is that engine."""
    from zqbench.telemetry.engines import recognise

    found = recognise(names)
    assert found is not None and found.key == key
    engine = engine_of(key)
    assert engine.series[engine.waiting] == "num_requests_waiting"
    assert engine.series[engine.running] == "num_requests_running"
    assert engine.queue_time is not None
    assert engine.series[engine.queue_time + "_count"] == "request_queue_time_seconds_count"


def test_recognise_leaves_triton_s_labelled_family_unknown() -> None:
    """Triton's TensorRT-LLM backend tells waiting from active by a label, not a name."""
    from zqbench.telemetry.engines import recognise

    assert recognise({"nv_trt_llm_request_metrics", "nv_inference_queue_duration_us"}) is None


def test_lmdeploy_series_become_the_server_queue(engine: str, tmp_path: Path) -> None:
    """LMDeploy's gauges and its queue-time histogram, scraped as the server queue."""
    import time

    from zqbench.hooks.contract import HookContext

    FakeEngine.metrics = "lmdeploy"
    scraper = PrometheusScraper(
        engine + "/metrics", found_by="discovery", engine=engine_of("lmdeploy"), primary=False
    )
    scraper.start(HookContext("t", tmp_path, engine, "127.0.0.1", 1, time.perf_counter_ns(), []))
    wait_for(lambda: FakeEngine.metric_gets >= 1, "the first scrape")
    queue = scraper.stop().server_queue
    assert isinstance(queue, ServerQueue) and (queue.engine, queue.engine_name) == (
        "lmdeploy",
        "LMDeploy",
    )
    waiting, running = queue.waiting, queue.running
    assert not isinstance(waiting, Unavailable) and not isinstance(running, Unavailable)
    assert (waiting.max, running.max) == (5.0, 3.0)
    assert isinstance(queue.queue_time, QueueTime)
    assert queue.queue_time.metric == "lmdeploy:request_queue_time_seconds"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("404", "GET {url}: HTTP 404"), ("html", "GET {url}: the answer is not Prometheus text")],
)
def test_discover_says_why_none(engine: str, kind: str, reason: str) -> None:
    FakeEngine.metrics = kind
    found = discover(engine)
    assert found.engine is None
    assert found.reason == reason.format(url=metrics_url(engine))


def test_discover_without_known_series_and_without_a_server(engine: str) -> None:
    FakeEngine.metrics = "dcgm"  # a Prometheus exposition, but no engine's
    found = discover(engine)
    assert found.engine is None
    assert found.reason == (
        f"GET {engine}/metrics: no known engine's series "
        "(vLLM, SGLang, TGI, llama.cpp, LMDeploy, TensorRT-LLM)"
    )
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    gone = discover(url, timeout_s=0.5)
    assert gone.engine is None and gone.reason.startswith(f"GET {url}/metrics: ")


def test_llama_cpp_deferred_requests_are_its_waiting_ones(engine: str, tmp_path: Path) -> None:
    """llama.cpp (`--metrics`): requests past its slots are deferred, its queue."""
    import time

    from zqbench.hooks.contract import HookContext

    FakeEngine.metrics = "llamacpp"
    scraper = PrometheusScraper(
        engine + "/metrics", found_by="discovery", engine=engine_of("llamacpp"), primary=False
    )
    scraper.start(HookContext("t", tmp_path, engine, "127.0.0.1", 1, time.perf_counter_ns(), []))
    wait_for(lambda: FakeEngine.metric_gets >= 1, "the first scrape")
    queue = scraper.stop().server_queue
    assert isinstance(queue, ServerQueue) and (queue.engine, queue.engine_name) == (
        "llamacpp",
        "llama.cpp",
    )
    waiting, running = queue.waiting, queue.running
    assert not isinstance(waiting, Unavailable) and not isinstance(running, Unavailable)
    assert (waiting.max, running.max) == (28.0, 4.0)
    assert isinstance(queue.queue_time, Unavailable)


@pytest.mark.parametrize(("kind", "engine_key"), [("sglang", "sglang"), ("tgi", "tgi")])
def test_sglang_and_tgi_series_become_the_server_queue(
    engine: str, kind: str, engine_key: str, tmp_path: Path
) -> None:
    """Their gauges under the canonical names; TGI's queue histogram, SGLang's TTFT not."""
    import time

    from zqbench.hooks.contract import HookContext

    FakeEngine.metrics = kind
    scraper = PrometheusScraper(
        engine + "/metrics", found_by="discovery", engine=engine_of(engine_key), primary=False
    )
    scraper.start(HookContext("t", tmp_path, engine, "127.0.0.1", 1, time.perf_counter_ns(), []))
    wait_for(lambda: FakeEngine.metric_gets >= 1, "the first scrape")
    queue = scraper.stop().server_queue  # and stop() scrapes once more: two readings
    assert isinstance(queue, ServerQueue) and queue.engine == engine_key
    waiting, running = queue.waiting, queue.running
    assert not isinstance(waiting, Unavailable) and not isinstance(running, Unavailable)
    assert (waiting.max, running.max) == ((7.0, 4.0) if kind == "sglang" else (9.0, 2.0))
    if kind == "tgi":  # unchanged between scrapes: nothing queued during the "run"
        assert isinstance(queue.queue_time, QueueTime) and queue.queue_time.count == 0
        assert queue.queue_time.metric == "tgi_request_queue_duration"
        assert isinstance(queue.prefix_cache, Unavailable)
        assert (
            queue.prefix_cache.unavailable == "TGI exports no prefix-cache counters zqbench reads"
        )
    else:
        assert isinstance(queue.queue_time, Unavailable)
        assert queue.queue_time.unavailable == "SGLang exports no queue-time histogram here"
        # SGLang's prefix cache: its hit-rate gauge, read at every scrape.
        cache = queue.prefix_cache
        assert isinstance(cache, CacheHitRate) and cache.scrapes >= 2
        assert (cache.metric, cache.mean, cache.max) == ("sglang:cache_hit_rate", 0.375, 0.375)
        assert prefix_cache_rows(PrefixCache(server=cache, usage=Unavailable(unavailable="x")))[
            0
        ] == (
            "server's counters",
            f"hit rate 37.5% on average, 37.5% at most, over {cache.scrapes} scrapes of "
            "sglang:cache_hit_rate (the server's recent rate, not counters)",
        )


# ------------------------------------------------------------------ whole runs


@pytest.mark.slow
def test_run_against_vllm_finds_and_scrapes_its_metrics(engine: str, tmp_path: Path) -> None:
    result = run_against(engine, tmp_path)
    queue = result.summary.server_queue
    assert isinstance(queue, ServerQueue)
    assert (queue.engine, queue.engine_name, queue.found_by) == ("vllm", "vLLM", "discovery")
    assert queue.url == engine + "/metrics"
    assert queue.scrapes == FakeEngine.metric_gets - 1  # every GET but discovery's
    assert not isinstance(queue.waiting, Unavailable) and not isinstance(queue.running, Unavailable)
    assert queue.waiting.max == 118.0  # the peak, exactly as the server said it
    assert queue.waiting.mean == pytest.approx(
        sum(v for v in queue.over_time.waiting if v is not None) / queue.scrapes
    )
    assert queue.waiting.metric == "vllm:num_requests_waiting"
    assert queue.running.max == 8.0
    t = queue.queue_time
    assert isinstance(t, QueueTime) and t.metric == "vllm:request_queue_time_seconds"
    assert t.count == 100 and t.mean == pytest.approx(5.2)
    assert (t.p50, t.p90, t.p99) == pytest.approx((P50, P90, P99), abs=1e-12)
    assert len(queue.over_time.t) == queue.scrapes
    assert queue.over_time.t == sorted(queue.over_time.t)
    assert queue.rejections == Rejections(
        metric="vllm:admission_rejections_total",
        total=43.0,
        by_reason={"max_num_queued_reqs": 40.0, "max_num_queued_tokens": 3.0},
    )
    assert result.summary.requests.ok == result.summary.requests.sent
    cache = result.summary.prefix_cache
    assert cache is not None and queue.prefix_cache == cache.server
    assert cache.server == CacheCounters(
        metrics=["vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"],
        queries=4000.0,
        hits=3000.0,
        hit_rate=0.75,
    )
    ok = result.summary.requests.ok
    usage = cache.usage
    assert isinstance(usage, CachedUsage)
    assert (usage.requests, usage.reporting, usage.cached_requests) == (ok, ok, ok)
    assert (usage.cached_tokens, usage.prompt_tokens) == (12 * ok, 16 * ok)
    assert usage.cached_share == 0.75 and usage.ttft_p50_uncached is None
    assert usage.ttft_p50_cached is not None and usage.ttft_p50_cached > 0

    out = result.out_dir
    long = pd.read_parquet(out / table.PROMETHEUS_TABLE)
    assert set(long["url"]) == {engine + "/metrics"}
    assert Summary.model_validate_json((out / "summary.json").read_text()) == result.summary
    md = (out / "summary.md").read_text()
    # The fake sends no timing headers: server_queue is the metrics' figure, not unavailable.
    assert (
        "| `server_queue` | from the server's metrics | 100 | ≤ 1000 | ≤ 5000 | ≤ 10000 | – | – |"
        in md
    )
    assert "- `server_queue`:" not in md
    assert "### Server queue" in md
    assert "From vLLM's /metrics (`vllm:num_requests_waiting`" in md
    assert "### Prefix cache" in md
    assert (
        "| server's counters | hit rate 75.0%: 3000 of 4000 prompt tokens "
        "(vllm:prefix_cache_hits_total, vllm:prefix_cache_queries_total) |" in md
    )
    assert f"75.0% of prompt tokens cached in {ok} of {ok} responses ({ok} with a hit)" in md
    assert "| requests waiting | max 118, mean " in md
    queue_row = (
        "| queue time | p50 ≤ 1000 ms, p90 ≤ 5000 ms, p99 ≤ 10000 ms (bucket bounds),"
        " mean 5200 ms (100 requests)"
    )
    assert queue_row + " |" in md
    assert (
        "| refused, by its own count | 43 (max_num_queued_reqs 40, max_num_queued_tokens 3) |" in md
    )
    html = (out / "report.html").read_text()
    assert '<section id="server-queue">' in html
    assert "From vLLM's /metrics (<code>vllm:num_requests_waiting</code>, " in html
    assert 'id="plot-server_queue"' in html
    _assert_png(out / "plots" / "server_queue.png")

    # `zqbench report` draws it again from summary.json alone.
    (out / "plots" / "server_queue.png").unlink()
    rerender_run(out)
    assert (out / "summary.md").read_text() == md
    _assert_png(out / "plots" / "server_queue.png")


@pytest.mark.slow
def test_a_404_metrics_means_no_scraper_and_the_reason_recorded(
    engine: str, tmp_path: Path
) -> None:
    FakeEngine.metrics = "404"
    result = run_against(engine, tmp_path)
    assert FakeEngine.metric_gets == 1  # the discovery GET, and no scrape
    reason = f"GET {engine}/metrics: HTTP 404"
    assert result.summary.server_queue == Unavailable(unavailable=reason)
    assert result.summary.environment["server_metrics"]["reason"] == reason
    # The run itself is unaffected: every scheduled request sent, none failed.
    requests = result.summary.requests
    assert requests.sent == result.summary.load.offered_requests and requests.failed == 0
    assert not (result.out_dir / table.PROMETHEUS_TABLE).exists()
    md = (result.out_dir / "summary.md").read_text()
    assert f"Unavailable from the server's metrics: {reason}" in md
    assert "- `server_queue`:" in md  # no timing headers and no metrics: unavailable


@pytest.mark.slow
def test_no_server_metrics_flag_sends_no_get_to_metrics(engine: str, tmp_path: Path) -> None:
    scenario = tmp_path / "queue.toml"
    scenario.write_text(SCENARIO)
    args = ["run", str(scenario), "--target", engine, "--model", "m", "--calibration", "off"]
    args += ["--no-server-metrics", "--quiet", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 4, result.output  # invalid: 20 requests, fewer than 100
    assert "requests: sent 20: served 20" in result.output and "failed 0" in result.output
    assert FakeEngine.metric_gets == 0
    summary = Summary.model_validate_json((tmp_path / "run" / "summary.json").read_text())
    assert summary.server_queue == Unavailable(unavailable="not looked for (--no-server-metrics)")
    assert "server queue" not in result.output


def test_an_explicit_telemetry_url_of_the_same_metrics_is_scraped_once(engine: str) -> None:
    look = ServerMetrics(engine)
    assert look.hooks([f"prometheus:{engine}/metrics/"]) == []
    assert FakeEngine.metric_gets == 0  # not even the discovery GET
    hooks = look.hooks(["prometheus:http://127.0.0.1:9/metrics"])  # another URL: discovered
    assert [h.name for h in hooks] == ["server_metrics"] and FakeEngine.metric_gets == 1


@pytest.mark.slow
def test_embedded_reference_server_run_shows_its_queue(tmp_path: Path) -> None:
    scenario = tmp_path / "queue.toml"
    scenario.write_text(SCENARIO.replace('api = "openai"', 'api = "anthropic"'))
    result = run_scenario(
        RunOptions.of(scenario=str(scenario), server_engine="sim", out=tmp_path / "run")
    )
    queue = result.summary.server_queue
    assert isinstance(queue, ServerQueue)
    assert (queue.engine, queue.found_by) == ("refserver", "discovery")
    assert not isinstance(queue.waiting, Unavailable) and queue.waiting.max == 0  # zero-queue
    t = queue.queue_time
    assert isinstance(t, QueueTime) and t.count == result.summary.requests.ok
    # The server's prefix-cache counters over the same window: every prompt token looked up,
    # none found (a 16-token prompt's one full block holds its last token: computed).
    ok = result.summary.requests.ok
    assert queue.prefix_cache == CacheCounters(
        metrics=["refserver_prefix_cache_hits_total", "refserver_prefix_cache_queries_total"],
        queries=16.0 * ok,
        hits=0.0,
        hit_rate=0.0,
    )
    md = (result.out_dir / "summary.md").read_text()
    assert "### Server queue" in md and "From the reference server's /metrics" in md
    html = (result.out_dir / "report.html").read_text()
    assert '<section id="server-queue">' in html and 'id="plot-server_queue"' in html
    _assert_png(result.out_dir / "plots" / "server_queue.png")


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        image.verify()
        assert image.format == "PNG"


def test_the_run_keeps_figures_over_a_reason_and_the_earliest_hooks_figures() -> None:
    """Hooks stop newest first: an explicit --telemetry source (built first) wins over the
    URL found on the target, and any figures over another source's reason."""
    from zqbench.hooks.contract import HookContext, HookResult
    from zqbench.hooks.running import RunningHooks

    def section(engine: str) -> ServerQueue:
        none = Unavailable(unavailable="-")
        series = QueueSeries(t=[], waiting=[], running=[])
        return ServerQueue(
            engine=engine,
            engine_name=engine,
            url="u",
            found_by="telemetry",
            scrapes=0,
            waiting=none,
            running=none,
            queue_time=none,
            over_time=series,
        )

    class Fixed:
        def __init__(self, name: str, queue: ServerQueue | Unavailable) -> None:
            self.name, self.queue = name, queue

        def start(self, ctx: HookContext) -> None:
            pass

        def stop(self) -> HookResult:
            return HookResult(server_queue=self.queue)

    def stop_hooks(hooks: list[Fixed]) -> HookResult:
        ctx = HookContext("r", Path("."), "u", "h", 1, start_monotonic_ns=0, stages=[])
        running = RunningHooks(list(hooks), ctx)
        running.start(0)
        return running.stop()

    reason = Unavailable(unavailable="GET u: HTTP 404")
    explicit, found = Fixed("prometheus", section("vllm")), Fixed("server_metrics", reason)
    assert stop_hooks([explicit, found]).server_queue == section("vllm")
    later = Fixed("server_metrics", section("tgi"))
    assert stop_hooks([explicit, later]).server_queue == section("vllm")
    assert stop_hooks([found]).server_queue == reason
