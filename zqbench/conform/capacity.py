"""The endpoint's capacity (requests computed at once), so the hidden-queue detector steps
past it (a queue only forms beyond it), and the refusal checks know when it was full.

advertised  the endpoint states it (zqbench.target.capacity.STATEMENTS: the reference
            server's /health `slots`, llama.cpp's /props, SGLang's /get_server_info, vLLM's
            /server_info in its dev mode).
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

Scrapes run on a thread of their own, every INTERVAL_S, only the known series' lines parsed
(zqbench.telemetry.prometheus.parse, as `zqbench run` scrapes), so the load client measuring
TTFT beside it loses little CPU. A /metrics that fails, or holds no such gauge, ends the
polling at once: discovery is best effort, and the detector says when it knows no capacity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from zqbench.metrics.classify import DEFAULT_MARGIN_S
from zqbench.metrics.false_refusals import most_at_once
from zqbench.target.capacity import first_stated
from zqbench.target.control import ControlClient
from zqbench.telemetry import prometheus
from zqbench.telemetry.engines import ENGINES
from zqbench.telemetry.sampler import poll_every

if TYPE_CHECKING:
    from zqbench.conform.evidence import Evidence

RUNNING_GAUGES = tuple(e.running for e in ENGINES)  # every engine's zqbench knows
INTERVAL_S = 0.1
MAX_CONCURRENCY = 256  # the widest step the detector sends (one connection a request)
SCRAPE_TIMEOUT_S = 2.0
ESTIMATE = "estimated: the most requests this run saw admitted at once"


@dataclass(frozen=True, slots=True)
class Capacity:
    value: int
    source: str  # "advertised by /health `slots`", "discovered: max vllm:num_requests_running"


def advertised(get_json: Callable[[str, float], Any]) -> Capacity | None:
    """The capacity the endpoint states (/health, llama.cpp's /props, ...: zqbench.target.
    capacity.STATEMENTS), as `zqbench run` reads it; `get_json(path, timeout_s)`: its JSON
    answer."""
    found = first_stated(get_json)
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
        return running(client.get_text(url, headers=prometheus.ACCEPT))
    except Exception:  # unreachable, an HTTP error: the gauge is best-effort evidence
        return None


def running(text: str) -> tuple[str, float] | None:
    """(gauge name, value summed over its label sets) of the first RUNNING_GAUGES present."""
    totals: dict[str, float] = {}
    for canonical, name, _, value in prometheus.parse(text):
        if canonical == "num_requests_running":
            totals[name] = totals.get(name, 0.0) + value
    return next(((name, totals[name]) for name in RUNNING_GAUGES if name in totals), None)


class RunningSampler:
    """`with RunningSampler(url) as s: ...` polls `url` (a /metrics) until the block ends;
    `s.discovered` is then the highest running count seen, or None."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.gauge: str | None = None
        self.peak = 0.0
        self._stop = threading.Event()
        self._client = ControlClient(timeout_s=SCRAPE_TIMEOUT_S)
        poll = (INTERVAL_S, self._stop, self._scrape)
        self._thread = threading.Thread(
            target=poll_every, args=poll, name="zqbench-conform-metrics", daemon=True
        )

    def __enter__(self) -> RunningSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(SCRAPE_TIMEOUT_S + 1.0)
        if not self._thread.is_alive():
            self._client.close()

    def _scrape(self) -> None:
        found = scrape(self._client, self.url)
        if found is None:
            self._stop.set()  # no /metrics, or no gauge in it: nothing to discover
            return
        self.gauge = found[0]
        self.peak = max(found[1], self.peak)

    @property
    def discovered(self) -> Capacity | None:
        if self.gauge is None or self.peak < 1:
            return None
        return Capacity(int(self.peak), f"discovered: max {self.gauge} during the steps")
