"""The state checks share: the target, request builders, every exchange seen, and the
load measurements that several checks judge (each taken once, on first use).

    low_load()  sequential streamed requests           zeroqueue.1-3
    slope()     bursts at rising concurrency, stepping zeroqueue.5
                past the endpoint's capacity (capacity.py)
    overload()  one burst past capacity, then recovery zeroqueue.6-10
    capacity()  advertised, discovered, else estimated zeroqueue.11-13
    retry_after()  a burst, its refusals retried      zeroqueue.12 (retry.py)
    disconnect()   streams cut, new requests sent     zeroqueue.13 (disconnect.py)

Requests are built by the dialects (`zqbench.dialects`), sequential ones sent through the
control-plane client (`zqbench.target.control`), bursts through the load transport (loadclient.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from zqbench.conform import capacity, disconnect, loadclient, retry
from zqbench.conform.capacity import Capacity
from zqbench.conform.disconnect import DisconnectRun
from zqbench.conform.evidence import Evidence, Recorder, Request
from zqbench.conform.options import ConformOptions
from zqbench.conform.retry import RetryRun
from zqbench.dialects import get_dialect
from zqbench.dialects.base import Dialect, DialectConfig, RequestSpec
from zqbench.target.capacity import PROPS_PATH
from zqbench.target.control import ControlClient
from zqbench.transport.base import HttpRequest
from zqbench.transport.origin import Origin, parse_base_url

PROMPT = "Write a long story about a lighthouse keeper who counts ships."
T = TypeVar("T")
MAX_SEEN = 5000  # exchanges kept for headers.* (bounded memory whatever the run does)


@dataclass
class SlopeStep:
    concurrency: int
    rounds: list[list[Evidence]]  # each burst of `concurrency` requests, in order
    duration_s: float

    @property
    def exchanges(self) -> list[Evidence]:
        return [ex for burst in self.rounds for ex in burst]


SETTLE_RUN = 3  # admitted requests in a row with an at-rest TTFT: back at rest
SETTLE_FACTOR = 1.5  # of the at-rest median TTFT, plus SETTLE_MARGIN_MS for a busy client
SETTLE_MARGIN_MS = 2.0


@dataclass(frozen=True)
class Settled:
    probes: int  # requests sent until back at rest (or settle_s ran out)
    waited_s: float
    at_rest: bool | None  # False: still busy when settle_s ran out (measured anyway);
    # None: no at-rest TTFT to compare with
    bound_ms: float | None  # the TTFT that counts as at rest


@dataclass
class SlopeRun:
    steps: list[SlopeStep]  # the steps that ran, in order of rising concurrency
    capacity: Capacity | None  # advertised, else discovered while the steps ran
    asked: tuple[int, ...]  # --slope-steps
    added: tuple[int, ...]  # steps added to reach 2x the capacity


@dataclass
class Overload:
    burst: list[Evidence]
    recovery: list[Evidence]  # sequential requests after the burst, until recovered
    recovery_s: float | None  # burst end -> first of `recovery_requests` admissions in a row
    baseline_ttft_ms: float | None  # median TTFT of the low-load requests


@dataclass
class Context:
    options: ConformOptions
    model: str = ""
    origin: Origin = field(init=False)
    base: str = field(init=False)
    seen: list[Evidence] = field(default_factory=list)
    _client: ControlClient | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.origin = parse_base_url(self.options.target)
        self.base = self.origin.url("")

    # ------------------------------------------------------------ requests
    @property
    def api(self) -> str:
        """The dialect that drives errors.* and zeroqueue.* (the first of --api)."""
        return self.options.apis[0]

    def dialect(self, api: str | None = None) -> Dialect:
        """The dialect of `api` (default: `self.api`), sending the run's key."""
        return self.keyed(self.options.api_key, api)

    def keyed(self, api_key: str | None, api: str | None = None) -> Dialect:
        """The dialect of `api` (default: `self.api`), sending `api_key` (None: no key)."""
        return get_dialect(api or self.api, DialectConfig(model=self.model, api_key=api_key))

    def generate(self, api: str, *, stream: bool, max_tokens: int | None = None) -> Request:
        """A generation request, read by the dialect's parser when it is answered."""
        dialect = self.dialect(api)
        spec = RequestSpec("conform", PROMPT, max_tokens or self.options.max_tokens, stream)
        return Request(dialect.build(spec), lambda hook: dialect.parser(spec, on_event=hook))

    def post(self, body: bytes, dialect: Dialect | None = None) -> Request:
        """`body` (any bytes) POSTed to the generation route with the dialect's headers."""
        d = dialect or self.dialect()
        return Request(HttpRequest("POST", d.path, d.headers, body))

    def get(self, path: str, api: str | None = None) -> Request:
        headers = self.dialect(api).headers
        return Request(
            HttpRequest("GET", path, tuple(h for h in headers if h[0] != "content-type"))
        )

    # ------------------------------------------------------------ sending
    def client(self) -> ControlClient:
        if self._client is None:
            self._client = ControlClient(timeout_s=self.options.timeout_s)
        return self._client

    def send(self, req: Request, client: ControlClient | None = None) -> Evidence:
        """One request on `client` (default: the run's), recorded for headers.*."""
        rec = Recorder(req)
        ex = rec.finish((client or self.client()).send(self.base, req.http, rec))
        self.record([ex])
        return ex

    def record(self, exchanges: list[Evidence]) -> None:
        room = MAX_SEEN - len(self.seen)
        self.seen.extend(exchanges[: max(0, room)])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def bursts(self, steps: list[list[list[Request]]]) -> list[list[list[Evidence]]]:
        """Each step's rounds of concurrent requests (loadclient.bursts), each step bounded
        by `check_time_s`."""
        out = loadclient.bursts(
            self.base,
            steps,
            timeout_s=self.options.timeout_s,
            step_time_s=self.options.check_time_s,
        )
        for step in out:
            for burst in step:
                self.record(burst)
        return out

    # ------------------------------------------------------------ measurements
    def once(self, key: str, make: Callable[[], T]) -> T:
        """`make()` the first time `key` is asked for; the same value afterwards."""
        if key not in self._cache:
            self._cache[key] = make()
        return cast(T, self._cache[key])

    def settle(self, before: str) -> Settled:
        """Sequential at-rest-sized requests until the endpoint answers as it did at rest,
        before a measurement that needs it so. A heavy check before it (errors.4's 32 MiB
        prompt) can keep a one-core server busy for tens of seconds after conform stopped
        waiting for it, and a TTFT measured meanwhile is the leftover work's. At rest:
        SETTLE_RUN admitted requests in a row, each within SETTLE_FACTOR of the at-rest
        median TTFT (measured before any other check: run_conformance)."""
        return self.once(f"settle:{before}", self._settle)

    def _settle(self) -> Settled:
        baseline = self.baseline_ttft_ms()
        if baseline is None:
            return Settled(0, 0.0, None, None)
        bound = SETTLE_FACTOR * baseline + SETTLE_MARGIN_MS
        req = self.generate(self.api, stream=True, max_tokens=4)  # as the at-rest requests
        start = time.monotonic()
        deadline = start + self.options.settle_s
        run = probes = 0
        while run < SETTLE_RUN and time.monotonic() < deadline:
            ex = self.send(req)
            probes += 1
            ttft = ex.ttft_ms if ex.admission == "admitted" else None
            # A refusal says nothing of leftover work: a server that refuses now and then at
            # rest (zeroqueue.11's fault) would otherwise never settle and cost settle_s.
            if ex.admission != "refused":
                run = run + 1 if ttft is not None and ttft <= bound else 0
            if ttft is None:
                time.sleep(0.05)  # refused or failed: give it room (bounded by the deadline)
        waited = round(time.monotonic() - start, 3)
        return Settled(probes, waited, run >= SETTLE_RUN, round(bound, 3))

    def low_load(self) -> list[Evidence]:
        """Sequential streamed requests on one connection: the endpoint at rest."""
        return self.once("low_load", self._low_load)

    def _low_load(self) -> list[Evidence]:
        req = self.generate(self.api, stream=True, max_tokens=4)
        deadline = time.monotonic() + self.options.check_time_s
        out = []
        for _ in range(self.options.low_load_requests):
            if time.monotonic() > deadline:
                break
            out.append(self.send(req))
        return out

    def baseline_ttft_ms(self) -> float | None:
        ttfts = sorted(
            t
            for ex in self.low_load()
            if ex.admission == "admitted" and (t := ex.ttft_ms) is not None
        )
        return ttfts[len(ttfts) // 2] if ttfts else None

    def slope(self) -> SlopeRun:
        """Bursts of `c` concurrent requests, `slope_rounds` times per step `c`, with steps
        added past the endpoint's capacity when it is known (capacity.py)."""
        return self.once("slope", self._slope)

    def _slope(self) -> SlopeRun:
        o = self.options
        asked = tuple(sorted(set(o.slope_steps)))
        health = self.send(self.get("/health")).json()
        known = capacity.advertised(health)
        if known is None:  # llama.cpp's server says its slots in GET /props
            known = capacity.advertised(None, self.send(self.get(PROPS_PATH)).json())
        plan = past(asked, known)
        self.settle("slope")
        # Nothing advertised: watch a running-requests gauge while the steps run.
        sampler = capacity.RunningSampler(self.base + "/metrics") if known is None else None
        with sampler or contextlib.nullcontext():
            steps = self._steps(plan)
        if sampler is not None and (found := sampler.discovered) is not None:
            # The top is the capacity only if some step offered more than it.
            largest = max(s.concurrency for s in steps)
            if found.value < largest:
                known = found
                more = past((largest,), found)[1:]
                steps += self._steps(more)
                plan += more
        return SlopeRun(steps, known, asked, tuple(c for c in plan if c not in asked))

    def _steps(self, concurrencies: tuple[int, ...]) -> list[SlopeStep]:
        if not concurrencies:
            return []
        o = self.options
        req = self.generate(self.api, stream=True, max_tokens=o.slope_max_tokens)
        done = self.bursts([[[req] * c] * o.slope_rounds for c in concurrencies])
        steps = []
        for c, rounds in zip(concurrencies, done, strict=False):
            flat = [ex for burst in rounds for ex in burst]
            if not flat:
                continue
            span = (max(ex.t_end for ex in flat) - min(ex.t_send for ex in flat)) / 1e9
            steps.append(SlopeStep(c, rounds, span))
        return steps

    def overload(self) -> Overload:
        """One burst of `overload_concurrency` requests, then sequential requests until
        `recovery_requests` in a row are admitted (or `recovery_s` passed)."""
        return self.once("overload", self._overload)

    def _overload(self) -> Overload:
        o = self.options
        baseline = self.baseline_ttft_ms()
        req = self.generate(self.api, stream=True, max_tokens=o.overload_max_tokens)
        ((burst,),) = self.bursts([[[req] * o.overload_concurrency]])
        t_end = time.monotonic()
        small = self.generate(self.api, stream=True, max_tokens=4)
        recovery: list[Evidence] = []
        in_a_row, recovered_at = 0, None
        while time.monotonic() - t_end < o.recovery_s + 1.0 and len(recovery) < 200:
            ex = self.send(small)
            recovery.append(ex)
            if ex.admission == "admitted":
                if in_a_row == 0:
                    recovered_at = time.monotonic() - t_end
                in_a_row += 1
                if in_a_row >= o.recovery_requests:
                    break
            else:
                in_a_row, recovered_at = 0, None
                time.sleep(0.02)  # poll, do not hammer a server that says it is full
        if in_a_row < o.recovery_requests:
            recovered_at = None
        return Overload(burst, recovery, recovered_at, baseline)

    def capacity(self) -> Capacity | None:
        """What zeroqueue.11-13 judge by: the slope's capacity (advertised or discovered),
        else estimated from the slope steps and the overload burst (capacity.estimated)."""
        return self.once("capacity", self._capacity)

    def _capacity(self) -> Capacity | None:
        run = self.slope()
        if run.capacity is not None:
            return run.capacity
        steps = (ex for step in run.steps for ex in step.exchanges)
        return capacity.estimated([*steps, *self.overload().burst])

    def retry_after(self) -> RetryRun:
        """A burst like overload()'s, its first refusals retried when Retry-After said."""
        return self.once("retry_after", self._retry_after)

    def _retry_after(self) -> RetryRun:
        o = self.options
        known = self.capacity()
        size = min(known.value if known else 1, retry.MAX_SAMPLE)
        req = self.generate(self.api, stream=True, max_tokens=o.overload_max_tokens)
        run = retry.measure(
            self.base,
            req,
            concurrency=o.overload_concurrency,
            size=size,
            timeout_s=o.timeout_s,
            time_s=o.check_time_s,
        )
        self.record(run.exchanges)
        return run

    def disconnect(self) -> DisconnectRun | None:
        """As many long streams as the capacity, cut mid-generation, then as many new
        requests (disconnect.py); None when the capacity is unknown."""
        return self.once("disconnect", self._disconnect)

    def disconnect_again(self) -> DisconnectRun | None:
        """One more disconnect round, measured afresh (zeroqueue.13's second look)."""
        return self._disconnect()

    def _disconnect(self) -> DisconnectRun | None:
        o = self.options
        known = self.capacity()
        if known is None:
            return None
        run = disconnect.measure(
            self.base,
            self.generate(self.api, stream=True, max_tokens=o.disconnect_max_tokens),
            self.generate(self.api, stream=True, max_tokens=4),
            n=min(known.value, capacity.MAX_CONCURRENCY // 2),  # 2 connections a slot
            max_tokens=o.disconnect_max_tokens,
            bound_s=o.disconnect_bound_s,
            timeout_s=o.timeout_s,
            time_s=o.check_time_s,
        )
        self.record(run.exchanges)
        return run


def past(steps: tuple[int, ...], known: Capacity | None) -> tuple[int, ...]:
    """`steps`, then one more at twice the capacity when none reaches it (at most
    capacity.MAX_CONCURRENCY: a step that wide would exhaust the client's sockets)."""
    if known is None or max(steps) >= 2 * known.value:
        return steps
    extra = min(2 * known.value, capacity.MAX_CONCURRENCY)
    return steps if extra <= max(steps) else (*steps, extra)
