"""The run so far in Prometheus' text exposition format (0.0.4), written directly.

Every family is written at scrape time from the latest merged progress, on the endpoint's
own thread, reading one reference the progress callback replaces. Written here rather than
by prometheus_client's `generate_latest`: that formats each line through its label
validation and escaping, about 20 us a line, and a run's ~850 lines (a histogram per
stage, class and metric) held the GIL for 17-20 ms a scrape, in the process whose event
loop sends the requests (one worker runs in zqbench's own). Here each series' label text
is built once per scrape and every bucket line is one format: under 1 ms
(benchmarks/live_metrics.py). The format is checked by prometheus_client's own parser and
a real Prometheus (tests/exporter). docs/telemetry.md ("Watching live") lists the families.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from zqbench.engines.live import Progress
from zqbench.exporter import live_slos
from zqbench.metrics.slo import Slo
from zqbench.samples.live_counts import BUCKETS_S, HISTOGRAMS, LiveCountsSnapshot

_HELP = {
    "latency": "t_end - t_send of successful requests",
    "ttft": "time to the first token of successful requests",
    "ttfa": "time to the first answer token (text or a tool call, after any thinking)",
    "time_to_reject": "t_end - t_send of refused requests (429, 503, 529, or in disguise)",
    "schedule_lag": (
        "t_send - t_intended - connection_wait of open-loop requests: the generator's own lateness"
    ),
}
_LE = (*(f"{b:g}" for b in BUCKETS_S), "+Inf")


@dataclass(frozen=True, slots=True)
class RunLabels:
    """What the exposition says of the run itself (from the scenario and the options)."""

    scenario: str
    run: str
    stage_names: tuple[str, ...]
    slos: tuple[Slo, ...] = ()


@dataclass(slots=True)
class LiveState:
    """The latest figures; replaced whole by the progress callback, read by scrapes."""

    progress: Progress = field(default_factory=Progress)  # all 0 before the first
    version: int = 0  # bumped with each progress
    # (monotonic time, version) of the latest scrapes, newest last
    scrapes: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=16))
    target: str = ""  # without credentials; known once the target is (after the port is bound)
    # name -> value of the target's own metrics, from zqbench's scraper of them
    server: Callable[[], dict[str, float]] | None = None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Exposition:
    """Writes the text a scrape gets."""

    def __init__(self, labels: RunLabels, state: LiveState) -> None:
        self.labels = labels
        self.state = state

    def _stage_name(self, stage: int) -> str:
        names = self.labels.stage_names
        return names[stage] if 0 <= stage < len(names) else str(stage)

    def render(self) -> str:
        progress, version = self.state.progress, self.state.version
        self.state.scrapes.append((time.monotonic(), version))
        counts = progress.counts or LiveCountsSnapshot()
        out: list[str] = []
        run = (("scenario", self.labels.scenario), ("run", self.labels.run),
               ("target", self.state.target))  # fmt: skip
        _family(out, "zqbench_run_info", "gauge", "the run being measured", [(_labels(run), 1)])
        for name, kind, doc, value in (
            ("zqbench_stage", "gauge", "index of the stage the load is in", progress.stage),
            ("zqbench_workers", "gauge", "workers reporting", progress.workers),
            ("zqbench_requests_in_flight", "gauge", "requests sent, not yet ended",
             progress.inflight),
            ("zqbench_requests_sent_total", "counter", "requests sent", progress.sent),
            ("zqbench_requests_due_total", "counter",
             "open loop: requests whose intended time has passed (the offered load)",
             progress.due),
        ):  # fmt: skip
            _family(out, name, kind, doc, [("", value)])
        self._requests(out, counts)
        for metric in HISTOGRAMS:
            self._histogram(out, metric, counts)
        self._slos(out, counts)
        if self.state.server is not None:
            rows = [(_labels([("metric", k)]), v) for k, v in sorted(self.state.server().items())]
            _family(out, "zqbench_server_metric", "gauge",
                    "the target's own queue figures as zqbench last scraped them "
                    "(its canonical names)", rows)  # fmt: skip
        return "".join(out)

    def _requests(self, out: list[str], counts: LiveCountsSnapshot) -> None:
        # The answer keeps the label name `outcome`: a public name (docs/telemetry.md).
        rows = [
            (_labels([("stage", str(stage)), ("stage_name", self._stage_name(stage)),
                      ("class", cls), ("status", status), ("outcome", answer)]), n)
            for (stage, cls, status, answer), n in sorted(counts.requests.items())
        ]  # fmt: skip
        doc = "requests ended, by stage, request class, HTTP status and outcome"
        _family(out, "zqbench_requests_total", "counter", doc, rows)

    def _histogram(self, out: list[str], metric: str, counts: LiveCountsSnapshot) -> None:
        name = f"zqbench_{metric}_seconds"
        out.append(f"# HELP {name} {_HELP[metric]}\n# TYPE {name} histogram\n")
        for (kind, stage, cls), h in sorted(counts.histograms.items()):
            if kind != metric:
                continue
            pairs = (("stage", str(stage)), ("stage_name", self._stage_name(stage)),
                     ("class", cls))  # fmt: skip
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
            running = 0
            for le, n in zip(_LE, h.bins, strict=True):
                running += n
                out.append(f'{name}_bucket{{{inner},le="{le}"}} {running}\n')
            out.append(f"{name}_sum{{{inner}}} {_number(h.sum_s)}\n")
            out.append(f"{name}_count{{{inner}}} {running}\n")

    def _slos(self, out: list[str], counts: LiveCountsSnapshot) -> None:
        values, thresholds, holds = [], [], []
        for slo in self.labels.slos:
            label = _labels([("slo", slo.expr)])
            thresholds.append((label, slo.threshold))
            estimate = live_slos.estimate(slo, counts)
            if estimate is None or math.isnan(estimate):
                continue
            values.append((label, estimate))
            holds.append((label, 1 if live_slos.holds(slo, estimate) else 0))
        _family(out, "zqbench_slo_value", "gauge",
                "an SLO's metric so far, in base units (s, fraction, ratio); an estimate: the "
                "verdict is summary.json's", values)  # fmt: skip
        _family(out, "zqbench_slo_threshold", "gauge", "an SLO's threshold", thresholds)
        _family(out, "zqbench_slo_holds", "gauge",
                "1 while an SLO's estimate so far holds, else 0", holds)  # fmt: skip


def _family(
    out: list[str], name: str, kind: str, doc: str, rows: Iterable[tuple[str, float]]
) -> None:
    out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
    out.extend(f"{name}{labels} {_number(value)}\n" for labels, value in rows)


__all__ = ["Exposition", "LiveState", "RunLabels"]
