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

from collections.abc import Callable
from typing import Any

import numpy as np

from zqbench import summary as model
from zqbench.metrics import quantiles
from zqbench.metrics.frame import MetricFrame
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, Fact
from zqbench.summary import json_number

NO_USAGE = (
    "no response's usage counted cached prompt tokens (vLLM's OpenAI API gives them with "
    "--enable-prompt-tokens-details)"
)


def prefix_cache(
    frame: MetricFrame, server_queue: model.ServerQueue | model.Unavailable | None
) -> model.PrefixCache | None:
    usage = cached_usage(frame)
    # None: not looked for
    server: model.CacheCounters | model.CacheHitRate | model.Unavailable | None = None
    if isinstance(server_queue, model.ServerQueue):
        server = server_queue.prefix_cache
    if server is None and isinstance(usage, model.Unavailable):
        return None  # the run looked at neither (a summary written before them too)
    if server is None:
        server = model.Unavailable(unavailable="the server's metrics were not read")
    return model.PrefixCache(server=server, usage=usage)


def cached_usage(frame: MetricFrame) -> model.CachedUsage | model.Unavailable:
    ok = frame.ok
    reporting = ok & ~np.isnan(frame.cached_tokens) & ~np.isnan(frame.prompt_tokens)
    if not reporting.any():
        return model.Unavailable(unavailable=NO_USAGE)
    cached = frame.cached_tokens[reporting]
    prompt = frame.prompt_tokens[reporting]
    hit = reporting & (frame.cached_tokens > 0)

    def ttft_p50(keep: np.ndarray) -> model.JsonFloat:
        return json_number(quantiles.quantile(frame.sorted_seconds("ttft", keep), 0.5))

    return model.CachedUsage(
        requests=int(np.count_nonzero(ok)),
        reporting=int(np.count_nonzero(reporting)),
        cached_tokens=int(cached.sum()),
        prompt_tokens=int(prompt.sum()),
        cached_share=json_number(float(cached.sum() / prompt.sum()) if prompt.sum() else None),
        cached_requests=int(np.count_nonzero(hit)),
        ttft_p50_cached=ttft_p50(hit),
        ttft_p50_uncached=ttft_p50(reporting & ~hit),
    )


def prefix_cache_rows(pc: model.PrefixCache) -> list[Fact]:
    """The prefix cache in two lines: the server's counters, the responses' usage."""
    server = _or_reason(pc.server, _cache_counters_text)
    return [
        Fact("server's counters", server),
        Fact("responses' usage", _or_reason(pc.usage, _usage_text)),
    ]


def _or_reason(value: Any, text: Callable[[Any], str]) -> str:
    """`text(value)`, or why there is no value."""
    if isinstance(value, model.Unavailable):
        return f"{NO_VALUE} ({value.unavailable})"
    return text(value)


def _cache_counters_text(c: model.CacheCounters | model.CacheHitRate) -> str:
    if isinstance(c, model.CacheHitRate):
        return (
            f"hit rate {c.mean:.1%} on average, {c.max:.1%} at most, over {c.scrapes} scrapes "
            f"of {c.metric} (the server's recent rate, not counters)"
        )
    rate = NO_VALUE if c.hit_rate is None else f"{c.hit_rate:.1%}"
    names = ", ".join(c.metrics)
    return f"hit rate {rate}: {c.hits:.0f} of {c.queries:.0f} prompt tokens ({names})"


def _usage_text(u: model.CachedUsage) -> str:
    share = NO_VALUE if u.cached_share is None else f"{u.cached_share:.1%}"
    return (
        f"{share} of prompt tokens cached in {u.reporting} of {u.requests} responses "
        f"({u.cached_requests} with a hit); TTFT p50 {_seconds_or_none(u.ttft_p50_cached)} "
        f"with a hit, {_seconds_or_none(u.ttft_p50_uncached)} without"
    )


def _seconds_or_none(value: float | str | None) -> str:
    return NO_VALUE if value is None else f"{float(value) * 1e3:.3g} ms"


def lines(summary: model.Summary) -> list[str]:
    """When the server's counters or the responses' usage told of it; else the report says
    why not."""
    pc = summary.prefix_cache
    if pc is None or all(isinstance(x, model.Unavailable) for x in (pc.server, pc.usage)):
        return []
    return ["prefix cache:", *(f"  {label}: {text}" for label, text in prefix_cache_rows(pc))]


SECTION = Section(
    "prefix_cache",
    "body",
    lines=lines,
    compute=lambda frame, run: prefix_cache(frame, run.server_queue),
    filters={"prefix_cache_rows": prefix_cache_rows},
)
