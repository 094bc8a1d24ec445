"""Counts and histograms of a run so far, kept from its samples, for the live exposition.

A worker feeds every `Sample` it records to `LiveCounts.record`; its `snapshot()` travels
with the worker's progress (every 0.5 s, across processes and, in a distributed run, over
the wire), and `merge` adds the snapshots of every worker. Only the sample is read, never
the engine, so any engine that writes samples feeds the same figures.

Labels never come from a server's answer alone, so their number is bounded whatever the
target sends:

    stage     the scenario's stage index (the exposition adds its name)
    class     the request source's class (a scenario's mix names them); past MAX_CLASSES
              distinct names, "other"
    status    the HTTP status if it is one of KNOWN_STATUSES, else its class ("4xx",
              "5xx"), "0" when no status came back, "other" outside 100-599
    answer    how the server answered (zqbench.metrics.classify.ANSWERS: ok, refused,
              refused_in_stream (a refusal in disguise: a 2xx with the overload error
              inside), timed_out, interrupted, failed), as far as one sample decides it;
              the exposition names this label `outcome`. served/queued and fast/slow
              refusals need the run's hold and set-up probes, so they are judged after it

Histograms hold seconds in fixed buckets (BUCKETS_S, about 1.5x apart from 1 ms to
120 s, so a quantile read from them is within one bucket of the truth):

    latency         t_end - t_send, ok requests
    ttft            t_first_token - t_send, ok requests with a first token
    ttfa            t_first_answer - t_send, ok requests whose answer came after thinking
                    or as a tool call (elsewhere it is their ttft)
    time_to_reject  t_end - t_send, refused requests (those in disguise too)
    schedule_lag    t_send - t_intended, open-loop requests
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from zqbench.dialects.base import THINKING, TOOL
from zqbench.metrics.classify import ANSWERS, REFUSALS, Answer, answer_of
from zqbench.samples.sample import Sample

BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
    0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0,
    20.0, 30.0, 60.0, 120.0,
)  # fmt: skip
N_BINS = len(BUCKETS_S) + 1  # the last bin is +Inf
HISTOGRAMS = ("latency", "ttft", "ttfa", "time_to_reject", "schedule_lag")
KNOWN_STATUSES = frozenset(
    {200, 201, 204, 400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 504, 529}
)
MAX_CLASSES = 64
OTHER_CLASS = "other"


def status_label(status: int) -> str:
    """A bounded label for an HTTP status (see the module's docstring)."""
    if status == 0:
        return "0"
    if status in KNOWN_STATUSES:
        return str(status)
    if 100 <= status <= 599:
        return f"{status // 100}xx"
    return "other"


RequestKey = tuple[int, str, str, str]  # stage, class, status, answer
HistogramKey = tuple[str, int, str]  # metric, stage, class


@dataclass(frozen=True, slots=True)
class HistogramCounts:
    bins: tuple[int, ...]  # per bucket, not cumulative; N_BINS long, the last +Inf
    sum_s: float


@dataclass(frozen=True, slots=True)
class LiveCountsSnapshot:
    """One worker's (or, merged, the run's) counts at one moment; plain and picklable."""

    requests: dict[RequestKey, int] = field(default_factory=dict)
    histograms: dict[HistogramKey, HistogramCounts] = field(default_factory=dict)

    def total(self) -> int:
        return sum(self.requests.values())


class LiveCounts:
    """A worker's running counts, fed one sample at a time (a few dictionary updates)."""

    def __init__(self) -> None:
        self._requests: dict[RequestKey, int] = {}
        self._bins: dict[HistogramKey, list[int]] = {}
        self._sums: dict[HistogramKey, float] = {}
        self._classes: set[str] = set()

    def _class(self, name: str) -> str:
        if name in self._classes:
            return name
        if len(self._classes) < MAX_CLASSES:
            self._classes.add(name)
            return name
        return OTHER_CLASS

    def _observe(self, metric: str, stage: int, cls: str, ns: int) -> None:
        seconds = max(ns, 0) / 1e9
        key = (metric, stage, cls)
        bins = self._bins.get(key)
        if bins is None:
            bins = self._bins[key] = [0] * N_BINS
            self._sums[key] = 0.0
        bins[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self._sums[key] += seconds

    def record(self, s: Sample) -> None:
        cls = self._class(s.request_class)
        kind = answer_of(s.status, s.error)
        key = (s.stage, cls, status_label(s.status), ANSWERS[kind])
        self._requests[key] = self._requests.get(key, 0) + 1
        if kind == Answer.OK:
            self._observe("latency", s.stage, cls, s.t_end - s.t_send)
            if s.t_first_token is not None:
                self._observe("ttft", s.stage, cls, s.t_first_token - s.t_send)
            if s.carried & (THINKING | TOOL) and s.t_first_answer is not None:
                self._observe("ttfa", s.stage, cls, s.t_first_answer - s.t_send)
        elif kind in REFUSALS:
            self._observe("time_to_reject", s.stage, cls, s.t_end - s.t_send)
        if s.t_intended is not None:
            self._observe("schedule_lag", s.stage, cls, s.t_send - s.t_intended)

    def snapshot(self) -> LiveCountsSnapshot:
        return LiveCountsSnapshot(
            requests=dict(self._requests),
            histograms={
                k: HistogramCounts(tuple(bins), self._sums[k]) for k, bins in self._bins.items()
            },
        )


def merge(snapshots: Iterable[LiveCountsSnapshot]) -> LiveCountsSnapshot:
    """The sum of several workers' counts."""
    total = LiveCounts()
    requests, bins, sums = total._requests, total._bins, total._sums
    for snap in snapshots:
        for key, n in snap.requests.items():
            requests[key] = requests.get(key, 0) + n
        for hkey, h in snap.histograms.items():
            mine = bins.setdefault(hkey, [0] * N_BINS)
            for i, n in enumerate(h.bins):
                mine[i] += n
            sums[hkey] = sums.get(hkey, 0.0) + h.sum_s
    return total.snapshot()


def bucket_quantile(bins: tuple[int, ...] | list[int], q: float) -> float | None:
    """The q-quantile read from bucket counts, linear within its bucket (as PromQL's
    histogram_quantile); the last finite bound when it falls in +Inf; None when empty."""
    total = sum(bins)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(bins):
        if n and seen + n >= rank:
            if i == len(BUCKETS_S):
                return BUCKETS_S[-1]
            low = BUCKETS_S[i - 1] if i else 0.0
            return low + (BUCKETS_S[i] - low) * (rank - seen) / n
        seen += n
    return BUCKETS_S[-1]
