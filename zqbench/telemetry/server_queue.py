"""The server's queue over a run, from the scrapes of its own metrics -> `ServerQueue`.

    server_queue(frame, scrape_times_ns, start_epoch_ns, source)   # summary.json's section

`frame` is the scraper's long table (telemetry.prometheus.parquet: t_epoch_ns, metric,
source_metric, labels, value) under the canonical names of zqbench.telemetry.engines.

- waiting and running: each scrape sums a gauge's series (one per model or engine); the
  run's mean and max are over the scrapes, and the series is kept for the plot;
- queue time: every histogram is cumulative and often starts above zero, so what the run
  did is each bucket's growth, its value at the last scrape minus the first (a series born
  during the run grew from 0). A percentile is the upper bound of the bucket its rank falls
  in: what the histogram can promise ("at most"), where interpolating inside the bucket, as
  Prometheus' histogram_quantile does, would invent a value. vLLM's first bucket ends at
  0.3 s: requests that never queued would read "p50 150 ms" interpolated, against a mean
  of 0.01 ms; here they read "p50 <= 300 ms". The mean is exact: the growth of _sum over
  the growth of _count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from zqbench.summary import (
    CacheCounters,
    CacheHitRate,
    GaugeSummary,
    QueueSeries,
    QueueTime,
    Rejections,
    ServerQueue,
    Unavailable,
    json_number,
)
from zqbench.telemetry.engines import (
    CACHE_HIT_RATE,
    CACHE_HITS,
    CACHE_QUERIES,
    REJECTIONS,
    Engine,
)

WAITING = "num_requests_waiting"
RUNNING = "num_requests_running"
BUCKET = "request_queue_time_seconds_bucket"
SUM = "request_queue_time_seconds_sum"
COUNT = "request_queue_time_seconds_count"
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
MAX_POINTS = 2000  # of the series in summary.json; past it, the peak of each run of scrapes


@dataclass(frozen=True, slots=True)
class Source:
    """Where the metrics came from: the engine, its /metrics URL, and how it was found."""

    engine: Engine
    url: str  # without credentials
    found_by: Literal["discovery", "telemetry"]


def bucket_bound(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The upper bound of the bucket of a cumulative histogram [(upper bound, count)] that
    the q-quantile's rank falls in: the q-quantile is at most this (inf: past the largest
    finite bound). None without observations, or without a +Inf bucket."""
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    counts = np.maximum.accumulate([c for _, c in ordered])  # rounding may break monotony
    total = float(counts[-1])
    if total <= 0:
        return None
    rank = q * total
    return next(bound for (bound, _), c in zip(ordered, counts, strict=True) if c >= rank)


def _per_scrape(frame: pd.DataFrame, metric: str, times: Sequence[int]) -> pd.Series:
    """A metric summed over its series at each scrape; NaN where a scrape lacked it."""
    rows = frame[frame["metric"] == metric]
    return rows.groupby("t_epoch_ns")["value"].sum().reindex(list(times))


def _gauge(frame: pd.DataFrame, metric: str, times: Sequence[int]) -> GaugeSummary | Unavailable:
    values = _per_scrape(frame, metric, times).dropna()
    if values.empty:
        return Unavailable(unavailable=f"no {metric} series at the server's /metrics")
    name = str(frame.loc[frame["metric"] == metric, "source_metric"].iloc[0])
    return GaugeSummary(metric=name, mean=float(values.mean()), max=float(values.max()))


def _growth(frame: pd.DataFrame, metric: str, first: int, last: int) -> pd.Series:
    """Each series' value at the last scrape minus the first (0 where it was not yet)."""
    rows = frame[(frame["metric"] == metric) & frame["t_epoch_ns"].isin((first, last))]
    table = rows.pivot_table(
        index="labels", columns="t_epoch_ns", values="value", aggfunc="sum"
    ).reindex(columns=[first, last])
    return table[last].fillna(0.0) - table[first].fillna(0.0)


def queue_time(
    frame: pd.DataFrame, times: Sequence[int], engine: Engine
) -> QueueTime | Unavailable:
    """Percentiles, mean and count of the queue-time histogram's growth over the run."""
    if engine.queue_time is None or frame[frame["metric"] == BUCKET].empty:
        return Unavailable(unavailable=f"{engine.name} exports no queue-time histogram here")
    if len(times) < 2:
        return Unavailable(unavailable="one scrape only: no growth to measure")
    first, last = times[0], times[-1]
    grown = _growth(frame, BUCKET, first, last)
    if (grown < 0).any():
        return Unavailable(unavailable="the histogram went down during the run (a restart?)")
    # One bucket per bound: series of several models add up ("+Inf" parses as inf).
    by_le = grown.groupby([float(json.loads(labels)["le"]) for labels in grown.index]).sum()
    buckets = [(float(le), float(n)) for le, n in by_le.items()]
    d_count = float(_growth(frame, COUNT, first, last).sum()) or float(by_le.max())
    d_sum = float(_growth(frame, SUM, first, last).sum())
    return QueueTime(
        metric=engine.queue_time,
        count=round(d_count),
        mean=d_sum / d_count if d_count > 0 else None,
        largest_bound=max((le for le, _ in buckets if math.isfinite(le)), default=None),
        **{name: json_number(bucket_bound(q, buckets)) for name, q in QUANTILES.items()},
    )


def cache_counters(
    frame: pd.DataFrame, times: Sequence[int], engine: Engine
) -> CacheCounters | CacheHitRate | Unavailable:
    """The prefix cache's counters' growth over the run (tokens), and the hit rate; or, for
    an engine with a hit-rate gauge instead (SGLang), the gauge over the run's scrapes."""
    if engine.cache_hit_rate is not None:
        values = _per_scrape(frame, CACHE_HIT_RATE, times).dropna()
        if values.empty:
            return Unavailable(unavailable=f"no {engine.cache_hit_rate} at the server's /metrics")
        return CacheHitRate(
            metric=engine.cache_hit_rate,
            mean=float(values.mean()),
            max=float(values.max()),
            scrapes=len(values),
        )
    if engine.cache_hits is None or engine.cache_queries is None:
        return Unavailable(
            unavailable=f"{engine.name} exports no prefix-cache counters zqbench reads"
        )
    rows = frame[frame["metric"].isin((CACHE_QUERIES, CACHE_HITS))]
    if rows.empty:
        return Unavailable(
            unavailable=f"no {engine.cache_hits} at the server's /metrics (prefix caching off?)"
        )
    if len(times) < 2:
        return Unavailable(unavailable="one scrape only: no growth to measure")
    first, last = times[0], times[-1]
    queries = float(_growth(frame, CACHE_QUERIES, first, last).sum())
    hits = float(_growth(frame, CACHE_HITS, first, last).sum())
    if queries < 0 or hits < 0:
        return Unavailable(unavailable="the cache counters went down during the run (a restart?)")
    return CacheCounters(
        metrics=sorted(set(rows["source_metric"])),
        queries=queries,
        hits=hits,
        hit_rate=hits / queries if queries > 0 else None,
    )


def rejections(
    frame: pd.DataFrame, times: Sequence[int], engine: Engine
) -> Rejections | Unavailable:
    """The growth of the engine's refusal counter over the run, in all and by reason."""
    if engine.rejections is None:
        return Unavailable(unavailable=f"{engine.name} exports no refusal counter zqbench reads")
    rows = frame[frame["metric"] == REJECTIONS]
    if rows.empty:
        # vLLM creates its counter's series only with admission control on.
        return Unavailable(unavailable=f"no {engine.rejections} at the server's /metrics")
    if len(times) < 2:
        return Unavailable(unavailable="one scrape only: no growth to measure")
    grown = _growth(frame, REJECTIONS, times[0], times[-1])
    if (grown < 0).any():
        return Unavailable(unavailable="the counter went down during the run (a restart?)")
    by_reason: dict[str, float] = {}
    for labels, n in grown.items():
        reason = str(json.loads(str(labels)).get("reason", ""))
        by_reason[reason] = by_reason.get(reason, 0.0) + float(n)
    return Rejections(
        metric=str(rows["source_metric"].iloc[0]),
        total=float(grown.sum()),
        by_reason=dict(sorted(by_reason.items())),
    )


def _series(frame: pd.DataFrame, times: Sequence[int], start_epoch_ns: int) -> QueueSeries:
    """The gauges at each scrape; with more than MAX_POINTS scrapes, the peak of each run."""
    t = (np.asarray(times, dtype=np.int64) - start_epoch_ns) / 1e9
    waiting = _per_scrape(frame, WAITING, times).to_numpy(dtype=float)
    running = _per_scrape(frame, RUNNING, times).to_numpy(dtype=float)
    step = max(1, math.ceil(len(t) / MAX_POINTS))
    if step > 1:
        starts = np.arange(0, len(t), step)
        t = t[starts]
        # The largest value of each run of scrapes (fmax skips NaN; NaN: none in the run).
        waiting, running = (np.fmax.reduceat(v, starts) for v in (waiting, running))

    def values(a: np.ndarray) -> list[float | None]:
        return [None if math.isnan(v) else float(v) for v in a]

    return QueueSeries(
        t=[round(float(x), 3) for x in t], waiting=values(waiting), running=values(running)
    )


def server_queue(
    frame: pd.DataFrame, scrape_times_ns: Sequence[int], start_epoch_ns: int, source: Source
) -> ServerQueue:
    """The section of summary.json: the gauges and the queue time over the run."""
    times = sorted(scrape_times_ns)
    return ServerQueue(
        engine=source.engine.key,
        engine_name=source.engine.name,
        url=source.url,
        found_by=source.found_by,
        scrapes=len(times),
        waiting=_gauge(frame, WAITING, times),
        running=_gauge(frame, RUNNING, times),
        queue_time=queue_time(frame, times, source.engine),
        over_time=_series(frame, times, start_epoch_ns),
        prefix_cache=cache_counters(frame, times, source.engine),
        rejections=rejections(frame, times, source.engine),
    )
