"""The inference engines whose own Prometheus metrics tell their queue, and their names.

The names are ENGINES below; docs/telemetry.md (and docs/targets.md, for the refusal
counters) lists them with the flags and releases that give them.

An engine is recognised from the sample names of one scrape (`recognise`): the first whose
waiting or running gauge is there. Names change between releases: a histogram the engine
does not export leaves the queue time unavailable, never 0. Sources: each project's
metrics source or reference, file and release (docs/telemetry.md). Not here: Triton's
TensorRT-LLM backend, whose queue is one gauge family told apart by a label
(`nv_trt_llm_request_metrics{request_type="waiting"}`), not by name.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

CACHE_QUERIES = "prefix_cache_queries"  # canonical names of the cache counters
CACHE_HITS = "prefix_cache_hits"
CACHE_HIT_RATE = "prefix_cache_hit_rate"  # a gauge of the engine's own recent hit rate
REJECTIONS = "rejections"  # canonical name of a counter of the requests the engine refused


@dataclass(frozen=True, slots=True)
class Engine:
    key: str  # vllm | sglang | tgi | llamacpp | lmdeploy | trtllm | refserver (server_queue.engine)
    name: str  # as shown: "vLLM"
    waiting: str  # gauge: requests queued now
    running: str  # gauge: requests being computed now
    queue_time: str | None  # histogram of time queued per request (seconds), base name
    # Counters of prompt tokens looked up in / found in the prefix cache, base names (the
    # exposition adds `_total`); None: the engine exports none zqbench knows.
    cache_queries: str | None = None
    cache_hits: str | None = None
    # A gauge of the recent hit rate, for an engine without the counters (SGLang's, LMDeploy's,
    # TensorRT-LLM's).
    cache_hit_rate: str | None = None
    # A counter of the requests the engine refused at admission, labelled by `reason`, base
    # name; None: the engine counts none (TGI, SGLang: their refusals are only the client's).
    rejections: str | None = None

    @property
    def series(self) -> dict[str, str]:
        """Scraped sample name -> canonical name (zqbench.telemetry.prometheus.ALIASES)."""
        out = {
            self.waiting: "num_requests_waiting",
            self.running: "num_requests_running",
        }
        if self.queue_time is not None:
            for suffix in ("_bucket", "_sum", "_count"):
                out[self.queue_time + suffix] = "request_queue_time_seconds" + suffix
        for counter, canonical in (
            (self.cache_queries, CACHE_QUERIES),
            (self.cache_hits, CACHE_HITS),
            (self.rejections, REJECTIONS),
        ):
            if counter is not None:
                out[counter] = out[counter + "_total"] = canonical
        if self.cache_hit_rate is not None:
            out[self.cache_hit_rate] = CACHE_HIT_RATE
        return out


ENGINES: tuple[Engine, ...] = (
    Engine(
        "vllm",
        "vLLM",
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:request_queue_time_seconds",
        cache_queries="vllm:prefix_cache_queries",
        cache_hits="vllm:prefix_cache_hits",
        rejections="vllm:admission_rejections",
    ),
    Engine(
        "sglang",
        "SGLang",
        "sglang:num_queue_reqs",
        "sglang:num_running_reqs",
        "sglang:queue_time_seconds",
        cache_hit_rate="sglang:cache_hit_rate",
    ),
    Engine(
        "tgi",
        "TGI",
        "tgi_queue_size",
        "tgi_batch_current_size",
        "tgi_request_queue_duration",
    ),
    Engine(
        "llamacpp",
        "llama.cpp",
        "llamacpp:requests_deferred",
        "llamacpp:requests_processing",
        None,  # no queue-time histogram: the wait shows in TTFB and TTFT
    ),
    Engine(
        "lmdeploy",
        "LMDeploy",
        "lmdeploy:num_requests_waiting",
        "lmdeploy:num_requests_running",
        "lmdeploy:request_queue_time_seconds",
        cache_hit_rate="lmdeploy:prefix_cache_hit_rate",
    ),
    Engine(
        "trtllm",
        "TensorRT-LLM",
        "trtllm_num_requests_waiting",
        "trtllm_num_requests_running",
        "trtllm_request_queue_time_seconds",
        cache_hit_rate="trtllm_kv_cache_hit_rate",
    ),
    Engine(
        "refserver",
        "the reference server",
        "refserver_num_requests_waiting",
        "refserver_num_requests_running",
        "refserver_request_queue_time_seconds",
        cache_queries="refserver_prefix_cache_queries",
        cache_hits="refserver_prefix_cache_hits",
        rejections="refserver_requests_rejected",
    ),
)


def recognise(names: Collection[str]) -> Engine | None:
    """The engine whose waiting or running gauge is among these sample names."""
    for engine in ENGINES:
        if engine.waiting in names or engine.running in names:
            return engine
    return None


def third_party_names() -> str:
    """The engines a target may be, as a message lists them: "vLLM, SGLang, ..."."""
    return ", ".join(e.name for e in ENGINES if e.key != "refserver")
