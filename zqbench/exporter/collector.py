"""The run so far as Prometheus metric families (prometheus_client's custom collector).

Every family is built at scrape time from the latest merged progress, so a scrape costs the
generator nothing between scrapes and never blocks the engine's loop (it runs on the
exposition's own thread, reading one reference the progress callback replaces).
docs/telemetry.md ("Watching live") lists the families and their labels.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from zqbench.exporter import live_slos
from zqbench.metrics.slo import Slo
from zqbench.samples.live_counts import BUCKETS_S, HISTOGRAMS, LiveCountsSnapshot

_HELP = {
    "latency": "t_end - t_send of successful requests",
    "ttft": "time to the first token of successful requests",
    "time_to_reject": "t_end - t_send of refused requests (429, 503, 529)",
    "schedule_lag": "t_send - t_intended of open-loop requests: the generator's lateness",
}
_LE = (*(f"{b:g}" for b in BUCKETS_S), "+Inf")


@dataclass(frozen=True, slots=True)
class RunLabels:
    """What the exposition says of the run itself (from the scenario and the options)."""

    scenario: str
    run: str
    stage_names: tuple[str, ...]
    slos: tuple[Slo, ...] = ()


class Figures(Protocol):
    """What the exposition reads of the run's merged progress (engines.live.Progress)."""

    @property
    def sent(self) -> int: ...
    @property
    def due(self) -> int: ...
    @property
    def inflight(self) -> int: ...
    @property
    def stage(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def counts(self) -> LiveCountsSnapshot | None: ...


@dataclass(frozen=True, slots=True)
class NoFigures:
    """Before the first progress: every count 0."""

    sent: int = 0
    due: int = 0
    inflight: int = 0
    stage: int = 0
    workers: int = 0
    counts: LiveCountsSnapshot | None = None


@dataclass(slots=True)
class LiveState:
    """The latest figures; replaced whole by the progress callback, read by scrapes."""

    progress: Figures = field(default_factory=NoFigures)
    version: int = 0  # bumped with each progress
    # (monotonic time, version) of the latest scrapes, newest last
    scrapes: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=16))
    target: str = ""  # without credentials; known once the target is (after the port is bound)
    # name -> value of the target's own metrics, from zqbench's scraper of them
    server: Callable[[], dict[str, float]] | None = None


class RunCollector(Collector):
    def __init__(self, labels: RunLabels, state: LiveState) -> None:
        self.labels = labels
        self.state = state

    def _stage_name(self, stage: int) -> str:
        names = self.labels.stage_names
        return names[stage] if 0 <= stage < len(names) else str(stage)

    def collect(self) -> Iterator[Metric]:
        progress, version = self.state.progress, self.state.version
        self.state.scrapes.append((time.monotonic(), version))
        counts = progress.counts or LiveCountsSnapshot()
        info = InfoMetricFamily("zqbench_run", "the run being measured")
        info.add_metric(
            [], {"scenario": self.labels.scenario, "run": self.labels.run,
                 "target": self.state.target},
        )  # fmt: skip
        yield info
        yield _gauge("zqbench_stage", "index of the stage the load is in", progress.stage)
        yield _gauge("zqbench_workers", "workers reporting", progress.workers)
        yield _gauge(
            "zqbench_requests_in_flight", "requests sent, not yet ended", progress.inflight
        )
        yield _counter("zqbench_requests_sent", "requests sent", progress.sent)
        yield _counter(
            "zqbench_requests_due",
            "open loop: requests whose intended time has passed (the offered load)",
            progress.due,
        )
        yield self._requests(counts)
        for metric in HISTOGRAMS:
            yield self._histogram(metric, counts)
        yield from self._slos(counts)
        if self.state.server is not None:
            yield from _server(self.state.server())

    def _requests(self, counts: LiveCountsSnapshot) -> CounterMetricFamily:
        family = CounterMetricFamily(
            "zqbench_requests",
            "requests ended, by stage, request class, HTTP status and outcome",
            labels=["stage", "stage_name", "class", "status", "outcome"],
        )
        for (stage, cls, status, outcome), n in sorted(counts.requests.items()):
            family.add_metric([str(stage), self._stage_name(stage), cls, status, outcome], n)
        return family

    def _histogram(self, metric: str, counts: LiveCountsSnapshot) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            f"zqbench_{metric}_seconds", _HELP[metric], labels=["stage", "stage_name", "class"]
        )
        for (name, stage, cls), h in sorted(counts.histograms.items()):
            if name != metric:
                continue
            running, buckets = 0, []
            for le, n in zip(_LE, h.bins, strict=True):
                running += n
                buckets.append((le, float(running)))
            family.add_metric([str(stage), self._stage_name(stage), cls], buckets, h.sum_s)
        return family

    def _slos(self, counts: LiveCountsSnapshot) -> Iterator[Metric]:
        value = GaugeMetricFamily(
            "zqbench_slo_value",
            "an SLO's metric so far, in base units (s, fraction, ratio); an estimate: the "
            "verdict is summary.json's",
            labels=["slo"],
        )
        threshold = GaugeMetricFamily("zqbench_slo_threshold", "an SLO's threshold", labels=["slo"])
        holds = GaugeMetricFamily(
            "zqbench_slo_holds", "1 while an SLO's estimate so far holds, else 0", labels=["slo"]
        )
        for slo in self.labels.slos:
            threshold.add_metric([slo.expr], slo.threshold)
            estimate = live_slos.estimate(slo, counts)
            if estimate is None or math.isnan(estimate):
                continue
            value.add_metric([slo.expr], estimate)
            holds.add_metric([slo.expr], 1.0 if live_slos.holds(slo, estimate) else 0.0)
        yield from (value, threshold, holds)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _server(values: dict[str, float]) -> Sequence[GaugeMetricFamily]:
    family = GaugeMetricFamily(
        "zqbench_server_metric",
        "the target's own queue figures as zqbench last scraped them (its canonical names)",
        labels=["metric"],
    )
    for name, v in sorted(values.items()):
        family.add_metric([name], v)
    return [family]


__all__ = ["LiveState", "RunCollector", "RunLabels"]
