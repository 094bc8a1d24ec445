"""summary.json's `prefix_cache` (computed by zqbench.metrics.prefix_cache): the server's
counters and the responses' usage, each in one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zqbench import summary as model
from zqbench.metrics.prefix_cache import prefix_cache
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, Fact
from zqbench.summary import Summary


def prefix_cache_rows(pc: model.PrefixCache) -> list[tuple[str, str]]:
    """The prefix cache in two lines: the server's counters, the responses' usage."""
    server = _or_reason(pc.server, _cache_counters_text)
    return [("server's counters", server), ("responses' usage", _or_reason(pc.usage, _usage_text))]


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


def view_of(s: Summary, _: object) -> tuple[Fact, ...] | None:
    pc = s.prefix_cache
    return None if pc is None else tuple(Fact(label, text) for label, text in prefix_cache_rows(pc))


def lines(summary: Summary) -> list[str]:
    """When the server's counters or the responses' usage told of it; else the report says
    why not."""
    pc = summary.prefix_cache
    if pc is None or all(isinstance(x, model.Unavailable) for x in (pc.server, pc.usage)):
        return []
    return ["prefix cache:", *(f"  {label}: {text}" for label, text in prefix_cache_rows(pc))]


SECTION = Section(
    "prefix_cache",
    "body",
    view=view_of,
    lines=lines,
    compute=lambda frame, run: prefix_cache(frame, run.server_queue),
)
