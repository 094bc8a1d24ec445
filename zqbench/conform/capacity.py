"""The endpoint's capacity (requests computed at once), so the hidden-queue detector steps
past it (a queue only forms beyond it), and the refusal checks know when it was full.

advertised  GET /health's JSON holds one of zqbench.target.capacity.CAPACITY_FIELDS as a
            positive integer (the reference server: `slots`).
discovered  the highest value of a running-requests gauge (RUNNING_GAUGES, summed over its
            label sets) scraped from GET /metrics while the steps run. vLLM advertises
            nothing, but `vllm:num_requests_running` tops out at its slot count
            (--max-num-seqs) once a step offers more. A top equal to the largest step
            offered says only "at least this many".
estimated  neither: the most requests this run saw admitted at once (zeroqueue.11-13 judge
            by it, named an estimate in their evidence). Each admitted span is shrunk by
            the outcomes' margin (DEFAULT_MARGIN_S) at both ends, as `zqbench run` counts
            it (zqbench.metrics.false_refusals), so two requests in transit at a turnover
            never count together: the estimate is never above the truth.

Scrapes run on a thread of their own, every INTERVAL_S, each line scanned by prefix (no
full parse), so the load client measuring TTFT beside it loses little CPU. A /metrics that
fails, or holds no such gauge, ends the polling at once: discovery is best effort, and the
detector says when it knows no capacity.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zqbench.metrics.classify import DEFAULT_MARGIN_S
from zqbench.metrics.false_refusals import most_at_once
from zqbench.target.capacity import stated, stated_by_props
from zqbench.target.control import ControlClient
from zqbench.telemetry.engines import ENGINES

if TYPE_CHECKING:
    from zqbench.conform.evidence import Evidence

RUNNING_GAUGES = tuple(e.running for e in ENGINES)  # every engine's zqbench knows
INTERVAL_S = 0.1
MAX_CONCURRENCY = 256  # the widest step the detector sends (one connection a request)
SCRAPE_TIMEOUT_S = 2.0
ACCEPT = (("accept", "text/plain; version=0.0.4"),)  # the text format, not protobuf
ESTIMATE = "estimated: the most requests this run saw admitted at once"


@dataclass(frozen=True, slots=True)
class Capacity:
    value: int
    source: str  # "advertised by /health `slots`", "discovered: max vllm:num_requests_running"


def advertised(health: Any, props: Any = None) -> Capacity | None:
    """The capacity /health states, else /props (llama.cpp's), as `zqbench run` reads it."""
    found = stated(health) or stated_by_props(props)
    return None if found is None else Capacity(found.value, f"advertised by {found.detail}")


def estimated(exchanges: Iterable[Evidence]) -> Capacity | None:
    """The most admitted requests in flight at once among `exchanges` (see the docstring)."""
    spans = [(ex.t_send, ex.t_end) for ex in exchanges if ex.admission == "admitted" and ex.t_end]
    if not spans:
        return None
    send, end = (np.array(x, dtype=np.float64) for x in zip(*spans, strict=True))
    seen = most_at_once(send, end, DEFAULT_MARGIN_S * 1e9)
    return Capacity(seen, ESTIMATE) if seen >= 1 else None


def scrape(client: ControlClient, url: str) -> tuple[str, float] | None:
    """(gauge, value) of the running gauge in one scrape of `url`; None when there is none."""
    try:
        return running(client.get_text(url, headers=ACCEPT))
    except Exception:  # unreachable, an HTTP error: the gauge is best-effort evidence
        return None


def running(text: str) -> tuple[str, float] | None:
    """(gauge name, value summed over its label sets) of the first RUNNING_GAUGES present."""
    for name in RUNNING_GAUGES:
        total, seen = 0.0, False
        for line in text.splitlines():
            if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
                continue
            rest = line.rpartition("}")[2] if "{" in line else line[len(name) :]
            try:
                total += float(rest.split()[0])
            except (IndexError, ValueError):
                continue
            seen = True
        if seen:
            return name, total
    return None


class RunningSampler:
    """`with RunningSampler(url) as s: ...` polls `url` (a /metrics) until the block ends;
    `s.discovered` is then the highest running count seen, or None."""

    def __init__(self, url: str, interval_s: float = INTERVAL_S) -> None:
        self.url = url
        self.interval_s = interval_s
        self.gauge: str | None = None
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: ControlClient | None = None

    def __enter__(self) -> RunningSampler:
        self._client = ControlClient(timeout_s=SCRAPE_TIMEOUT_S)
        self._thread = threading.Thread(target=self._loop, name="zqbench-conform-metrics")
        self._thread.daemon = True
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(SCRAPE_TIMEOUT_S + 1.0)
        if self._client is not None and not (self._thread and self._thread.is_alive()):
            self._client.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._scrape():
                return  # no /metrics, or no gauge in it: nothing to discover
            self._stop.wait(self.interval_s)

    def _scrape(self) -> bool:
        assert self._client is not None
        found = scrape(self._client, self.url)
        if found is None:
            return False
        self.gauge = found[0]
        self.peak = max(found[1], self.peak or 0.0)
        return True

    @property
    def discovered(self) -> Capacity | None:
        if self.gauge is None or not self.peak or self.peak < 1:
            return None
        return Capacity(int(self.peak), f"discovered: max {self.gauge} during the steps")
