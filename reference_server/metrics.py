"""Prometheus metrics, named `refserver_*` with the suffixes vLLM uses for the same quantity.

A harness adapter maps them 1:1: `refserver_num_requests_waiting` is
`vllm:num_requests_waiting`, `refserver_request_queue_time_seconds` is
`vllm:request_queue_time_seconds`, and so on. Prometheus reserves `:` for
recording rules, hence the underscore. One registry per server instance, so
tests can run several servers in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# vLLM's TTFT buckets (seconds), extended downwards: the sim and zero-queue live below 1 ms.
_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
    0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_SHORT_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class Metrics:
    def __init__(self, scheduler: str, engine: str, device: str, model: str, seed: int) -> None:
        r = self.registry = CollectorRegistry()
        Gauge(
            "refserver_info",
            "Static facts about this server",
            ["scheduler", "engine", "device", "model", "seed"],
            registry=r,
        ).labels(scheduler, engine, device, model, str(seed)).set(1)
        self.http_requests = Counter(
            "refserver_http_requests",
            "Responses by route and HTTP status",
            ["route", "status"],
            registry=r,
        )
        self.rejected = Counter(
            "refserver_requests_rejected",
            "Requests refused before any compute, by reason",
            ["reason"],
            registry=r,
        )
        self.success = Counter(
            "refserver_request_success",
            "Finished requests by finish reason",
            ["finished_reason"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "refserver_prompt_tokens", "Prompt tokens of admitted requests", registry=r
        )
        self.generation_tokens = Counter(
            "refserver_generation_tokens", "Generated tokens", registry=r
        )
        self.in_flight = Gauge(
            "refserver_num_requests_in_flight", "HTTP requests being handled", registry=r
        )
        self.running = Gauge(
            "refserver_num_requests_running", "Requests holding a sequence slot", registry=r
        )
        self.waiting = Gauge(
            "refserver_num_requests_waiting", "Requests queued for a slot (fifo only)", registry=r
        )
        self.slots = Gauge("refserver_num_slots", "Sequence slots (max batch size)", registry=r)
        self.kv_usage = Gauge(
            "refserver_kv_cache_usage_perc", "Fraction of the KV budget reserved", registry=r
        )
        self.batch_size = Histogram(
            "refserver_batch_size",
            "Sequences per engine step",
            ["phase"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.prefill_group = Histogram(
            "refserver_prefill_group_size",
            "Requests prefilled in the same step as this one, by execution profile",
            ["profile"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.queue_time = Histogram(
            "refserver_request_queue_time_seconds",
            "Received to dispatched (slot assigned)",
            buckets=_SHORT_BUCKETS,
            registry=r,
        )
        self.dispatch_delay = Histogram(
            "refserver_request_dispatch_delay_seconds",
            "Received to first compute step began",
            buckets=_SHORT_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "refserver_time_to_first_token_seconds",
            "Received to first token generated",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "refserver_inter_token_latency_seconds",
            "Decode step time as seen by each sequence",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "refserver_e2e_request_latency_seconds",
            "Received to last token",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.step_time = Histogram(
            "refserver_engine_step_seconds",
            "Wall time of one engine step",
            ["phase"],
            buckets=_SHORT_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
