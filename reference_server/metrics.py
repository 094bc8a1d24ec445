"""Prometheus metrics, named `refserver_*` with the suffixes vLLM uses for the same quantity.

A harness adapter maps them 1:1: `refserver_num_requests_waiting` is
`vllm:num_requests_waiting`, `refserver_request_queue_time_seconds` is
`vllm:request_queue_time_seconds`, and so on. Prometheus reserves `:` for
recording rules, hence the underscore. One registry per server instance, so
tests can run several servers in one process.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFIX = "refserver_"

# vLLM's TTFT buckets (seconds), extended downwards: the sim and zero-queue live below 1 ms.
_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_SHORT_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self, scheduler: str, engine: str, device: str, model: str) -> None:
        self.registry = CollectorRegistry()
        # No seed: it would let anyone replay the seeds derived for unseeded requests.
        facts = ["scheduler", "engine", "device", "model"]
        info = self._gauge("info", "Static facts about this server", facts)
        info.labels(scheduler, engine, device, model).set(1)
        self.http_requests = self._counter(
            "http_requests", "Responses by route and HTTP status", ["route", "status"]
        )
        self.rejected = self._counter(
            "requests_rejected", "Requests refused before any compute, by reason", ["reason"]
        )
        self.success = self._counter(
            "request_success", "Finished requests by finish reason", ["finished_reason"]
        )
        self.prompt_tokens = self._counter("prompt_tokens", "Prompt tokens of admitted requests")
        self.generation_tokens = self._counter("generation_tokens", "Generated tokens")
        # vLLM's prefix_cache_queries / _hits: prompt tokens of every prefill looked up in
        # the cache, and those it supplied (nothing is looked up without a cache).
        self.prefix_cache_queries = self._counter(
            "prefix_cache_queries", "Prompt tokens of prefills looked up in the prefix cache"
        )
        self.prefix_cache_hits = self._counter(
            "prefix_cache_hits", "Prompt tokens the prefix cache supplied"
        )
        self.in_flight = self._gauge("num_requests_in_flight", "HTTP requests being handled")
        self.running = self._gauge("num_requests_running", "Requests holding a sequence slot")
        self.waiting = self._gauge("num_requests_waiting", "Requests queued for a slot (fifo only)")
        self.slots = self._gauge("num_slots", "Sequence slots (max batch size)")
        self.kv_usage = self._gauge("kv_cache_usage_perc", "Fraction of the KV budget reserved")
        self.batch_size = self._histogram(
            "batch_size", "Sequences per engine step", _BATCH_BUCKETS, ["phase"]
        )
        self.prefill_group = self._histogram(
            "prefill_group_size",
            "Requests prefilled in the same step as this one, by execution profile",
            _BATCH_BUCKETS,
            ["profile"],
        )
        self.queue_time = self._histogram(
            "request_queue_time_seconds", "Received to dispatched (slot assigned)", _SHORT_BUCKETS
        )
        self.dispatch_delay = self._histogram(
            "request_dispatch_delay_seconds", "Received to first compute step began", _SHORT_BUCKETS
        )
        self.ttft = self._histogram(
            "time_to_first_token_seconds", "Received to first token generated", _LATENCY_BUCKETS
        )
        self.itl = self._histogram(
            "inter_token_latency_seconds",
            "Decode step time as seen by each sequence",
            _LATENCY_BUCKETS,
        )
        self.e2e = self._histogram(
            "e2e_request_latency_seconds", "Received to last token", _LATENCY_BUCKETS
        )
        self.step_time = self._histogram(
            "engine_step_seconds", "Wall time of one engine step", _SHORT_BUCKETS, ["phase"]
        )
        # The zero-queue dimensions (docs/reference-server.md, "Metrics").
        self.time_to_reject = self._histogram(
            "time_to_reject_seconds", "Received to refused, of refused requests", _SHORT_BUCKETS
        )
        self.dispatch_jitter = self._gauge(
            "dispatch_jitter_seconds",
            "Standard deviation of the last 100 dispatch delays (received to compute start)",
        )
        self.gpu_telemetry = self._gauge(
            "gpu_telemetry_available",
            "1 when GPU utilization density is measured (NVML), else 0 with the reason",
            ["reason"],
        )
        # Registered only where it is measured: absent, never 0, without a GPU.
        self.gpu_density: Gauge | None = None

    def measure_gpu_density(self, read: Callable[[], float | None]) -> None:
        """Export `refserver_gpu_utilization_density` from `read` (None: no reading yet)."""
        self.gpu_telemetry.labels("").set(1)
        gauge = self._gauge(
            "gpu_utilization_density",
            "Mean GPU busy fraction while at least one request holds a slot (NVML, 0-1)",
        )
        gauge.set_function(lambda: _nan_if_none(read()))
        self.gpu_density = gauge

    def no_gpu_density(self, reason: str) -> None:
        self.gpu_telemetry.labels(reason).set(0)

    # Every metric is `refserver_<name>` in this server's own registry.
    def _counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        return Counter(PREFIX + name, doc, labels, registry=self.registry)

    def _gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
        return Gauge(PREFIX + name, doc, labels, registry=self.registry)

    def _histogram(
        self, name: str, doc: str, buckets: Sequence[float], labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(PREFIX + name, doc, labels, buckets=buckets, registry=self.registry)

    def watch_dispatch_jitter(self, read: Callable[[], float]) -> None:
        self.dispatch_jitter.set_function(read)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
