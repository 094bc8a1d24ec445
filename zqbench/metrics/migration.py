"""Error-code migration: how the status mix moves when load goes past capacity.

A queueing server under overload turns work into 429s and timeouts; a zero-queue
server turns it into fast 503/529 refusals that say when to come back (Retry-After).
Three views of one run, all computed from the samples:

- `over_time`: request counts per status key (or outcome) in fixed time bins of `t_send`;
- `migration`: the baseline stage (the first with requests) beside the overload stage
  (the stage with the highest send rate, requests sent / stage duration): status shares,
  admitted latency p50/p99 and time_to_reject p99 of each;
- `retry_after`: how many refusals (429/503/529, and those in disguise: a 2xx
  `refused_in_stream`) carried a Retry-After header.

A view without inputs is `Unavailable` (`{"unavailable": "<reason>"}`), never zeros.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from zqbench import summary as model
from zqbench.metrics import quantiles
from zqbench.metrics.frame import NS_PER_S, MetricFrame

MAX_BINS = 300  # longer runs get wider bins, so summary.json stays small


def send_bins(frame: MetricFrame, duration_s: float) -> tuple[float, np.ndarray, int]:
    """(bin width s, each request's bin floor(t_send / width), bins): the over-time views'
    bins, for a frame with at least one request."""
    t_send_s = frame.columns.t_send / NS_PER_S
    # 1 s bins, widened to a whole number of seconds so a run has at most MAX_BINS.
    width = float(max(1, math.ceil(max(duration_s, float(np.max(t_send_s))) / MAX_BINS)))
    bins = np.floor(t_send_s / width).astype(np.int64)
    return width, bins, int(bins.max()) + 1


def over_time(
    frame: MetricFrame, duration_s: float, keys: np.ndarray, names: Iterable[str]
) -> model.OverTime | model.Unavailable:
    """Bins of width w: start_s [0, w, ...], counts {"200": [...], "529": [...]}, one list
    per name in `names`' order (each request's key in `keys`: a status key, an outcome).

    Request i falls in bin floor(t_send / w); a key's list has one count per bin."""
    if frame.n == 0:
        return model.Unavailable(unavailable="no request sent")
    width, bins, n_bins = send_bins(frame, duration_s)
    counts = {
        str(name): np.bincount(bins[keys == name], minlength=n_bins).astype(int).tolist()
        for name in names
    }
    return model.OverTime(bin_s=width, start_s=[i * width for i in range(n_bins)], counts=counts)


def status_counts(keys: np.ndarray) -> dict[str, int]:
    """{"200": n, "503": n, "transport:timeout": n}, most frequent first."""
    counts = pd.Series(keys).value_counts(sort=True)
    return {str(k): int(v) for k, v in counts.items()}


def status_shares(keys: np.ndarray) -> dict[str, float]:
    """Each status key's share of `keys`, most frequent first."""
    return {k: v / len(keys) for k, v in status_counts(keys).items()}


def _stage_view(
    frame: MetricFrame, stage: int, name: str, start_s: float, end_s: float
) -> model.MigrationStage:
    keep = frame.mask(stage=stage)
    latency = frame.sorted_seconds("latency", keep)
    reject = frame.sorted_seconds("time_to_reject", keep)
    sent = int(np.count_nonzero(keep))
    p50, p99 = quantiles.quantile(latency, 0.5), quantiles.quantile(latency, 0.99)
    return model.MigrationStage(
        stage=stage,
        name=name,
        sent=sent,
        send_rate=sent / (end_s - start_s) if end_s > start_s else None,
        share=status_shares(frame.status_keys[keep]),
        latency_p50=p50,
        latency_p99=p99,
        latency_p99_p50=p99 / p50 if p50 and p99 is not None else None,
        time_to_reject_p99=quantiles.quantile(reject, 0.99),
    )


def migration(
    frame: MetricFrame, stages: Sequence[tuple[str, float, float]]
) -> model.Migration | model.Unavailable:
    """The baseline stage beside the overload stage; `stages` are (name, start_s, end_s)."""
    rates: list[tuple[int, float]] = []
    for i, (_, start, end) in enumerate(stages):
        sent = int(np.count_nonzero(frame.stage == i))
        if sent and end > start:
            rates.append((i, sent / (end - start)))
    if len(rates) < 2:
        return model.Unavailable(
            unavailable="fewer than two stages with requests: no baseline to compare"
        )
    first = rates[0][0]
    # Highest send rate; on a tie the later stage (the one that follows the build-up).
    busiest = max(rates[1:], key=lambda r: (r[1], r[0]))[0]
    baseline, overload = (_stage_view(frame, i, *stages[i]) for i in (first, busiest))
    keys = sorted(
        set(baseline.share) | set(overload.share), key=lambda k: -(overload.share.get(k, 0.0))
    )
    rows = [
        model.MigrationRow(
            status=k, baseline=baseline.share.get(k, 0.0), overload=overload.share.get(k, 0.0)
        )
        for k in keys
    ]
    return model.Migration(baseline=baseline, overload=overload, rows=rows)


def retry_after(
    frame: MetricFrame, retry_after_s: np.ndarray
) -> model.RetryAfter | model.Unavailable:
    """Share of refusals (429/503/529, or in disguise) that carried Retry-After, and its
    values."""
    refused = frame.columns.refused
    n = int(np.count_nonzero(refused))
    if n == 0:
        return model.Unavailable(unavailable="no request was refused (429/503/529)")
    values = retry_after_s[refused]
    given = values[~np.isnan(values)]
    return model.RetryAfter(
        refusals=n,
        with_retry_after=len(given),
        share=len(given) / n,
        min_s=float(given.min()) if len(given) else None,
        max_s=float(given.max()) if len(given) else None,
    )
