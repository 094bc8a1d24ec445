"""summary.json's `prefix_cache`: the server's cache counters, and what usage said of it.

    server   the growth of the engine's own counters over the run (vLLM:
             vllm:prefix_cache_queries / vllm:prefix_cache_hits, in prompt tokens), from the
             server-queue scrapes (zqbench.telemetry.server_queue.cache_counters)
    usage    the successful responses whose usage counts cached prompt tokens (OpenAI
             `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`):
             the cached share of their prompt tokens, and TTFT p50 of those with cached
             tokens against those without

A number the server does not give is unavailable, with the reason, never 0. The section is
absent when there is neither: no engine's metrics scraped (none found, or not looked for)
and no cached-token counts; and in summaries written before it.
"""

from __future__ import annotations

import numpy as np

from zqbench.metrics import quantiles
from zqbench.metrics.frame import MetricFrame
from zqbench.summary import (
    CacheCounters,
    CachedUsage,
    CacheHitRate,
    PrefixCache,
    ServerQueue,
    Unavailable,
    json_number,
)

NO_USAGE = (
    "no response's usage counted cached prompt tokens (vLLM's OpenAI API gives them with "
    "--enable-prompt-tokens-details)"
)


def prefix_cache(
    frame: MetricFrame, server_queue: ServerQueue | Unavailable | None
) -> PrefixCache | None:
    usage = cached_usage(frame)
    server: CacheCounters | CacheHitRate | Unavailable | None = None  # None: not looked for
    if isinstance(server_queue, ServerQueue):
        server = server_queue.prefix_cache
    if server is None and isinstance(usage, Unavailable):
        return None  # the run looked at neither (a summary written before them too)
    if server is None:
        server = Unavailable(unavailable="the server's metrics were not read")
    return PrefixCache(server=server, usage=usage)


def _p50(values: np.ndarray) -> float | None:
    kept = np.sort(values[~np.isnan(values)])
    p50 = quantiles.quantile(kept, 0.5)
    return None if p50 is None else p50 / 1e9


def cached_usage(frame: MetricFrame) -> CachedUsage | Unavailable:
    ok = frame.ok
    if len(frame.cached_tokens) != frame.n:  # a frame built without the columns
        return Unavailable(unavailable=NO_USAGE)
    reporting = ok & ~np.isnan(frame.cached_tokens) & ~np.isnan(frame.prompt_tokens)
    if not reporting.any():
        return Unavailable(unavailable=NO_USAGE)
    cached = frame.cached_tokens[reporting]
    prompt = frame.prompt_tokens[reporting]
    ttft = frame.values["ttft"][reporting]
    hit = cached > 0
    return CachedUsage(
        requests=int(np.count_nonzero(ok)),
        reporting=int(np.count_nonzero(reporting)),
        cached_tokens=int(cached.sum()),
        prompt_tokens=int(prompt.sum()),
        cached_share=json_number(float(cached.sum() / prompt.sum()) if prompt.sum() else None),
        cached_requests=int(np.count_nonzero(hit)),
        ttft_p50_cached=json_number(_p50(ttft[hit])),
        ttft_p50_uncached=json_number(_p50(ttft[~hit])),
    )
