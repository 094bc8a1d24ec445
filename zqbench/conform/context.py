"""The state checks share: the target, request builders, every exchange seen, and the
load measurements that several checks judge (each taken once, on first use).

    low_load()  sequential streamed requests           zeroqueue.1-3
    slope()     bursts at rising concurrency           zeroqueue.5
    overload()  one burst past capacity, then recovery zeroqueue.6-10
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from zqbench.conform import client as http
from zqbench.conform import loadclient
from zqbench.conform.client import Exchange, Request
from zqbench.conform.model import ConformOptions
from zqbench.conform.wire import classify, first_token_time
from zqbench.dialects import get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec
from zqbench.transport._common import Origin, parse_base_url

if TYPE_CHECKING:
    import httpx

PROMPT = "Write a long story about a lighthouse keeper who counts ships."
T = TypeVar("T")
MAX_SEEN = 5000  # exchanges kept for headers.* (bounded memory whatever the run does)


@dataclass
class SlopeStep:
    concurrency: int
    exchanges: list[Exchange]
    duration_s: float


@dataclass
class Overload:
    burst: list[Exchange]
    recovery: list[Exchange]  # sequential requests after the burst, until recovered
    recovery_s: float | None  # burst end -> first of `recovery_requests` admissions in a row
    baseline_ttft_ms: float | None  # median TTFT of the low-load requests


@dataclass
class Context:
    options: ConformOptions
    model: str = ""
    origin: Origin = field(init=False)
    base: str = field(init=False)
    seen: list[Exchange] = field(default_factory=list)
    _client: httpx.Client | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.origin = parse_base_url(self.options.target)
        self.base = f"{self.origin.scheme}://{self.origin.authority}{self.origin.prefix}"

    # ------------------------------------------------------------ requests
    @property
    def api(self) -> str:
        """The dialect that drives errors.* and zeroqueue.* (the first of --api)."""
        return self.options.apis[0]

    def headers(self, api: str, *, key: bool = True) -> tuple[tuple[str, str], ...]:
        """The dialect's request headers (content type, version, the key unless `key=False`)."""
        config = DialectConfig(model=self.model, api_key=self.options.api_key if key else None)
        return get_dialect(api, config).build(RequestSpec("conform", "", 1)).headers

    def generate(
        self, api: str, *, stream: bool, max_tokens: int | None = None, prompt: str = PROMPT
    ) -> Request:
        config = DialectConfig(model=self.model, api_key=self.options.api_key)
        spec = RequestSpec("conform", prompt, max_tokens or self.options.max_tokens, stream)
        built = get_dialect(api, config).build(spec)
        return Request(built.method, built.path, tuple(built.headers), built.body)

    def json_request(self, api: str, path: str, body: bytes, *, key: bool = True) -> Request:
        return Request("POST", path, self.headers(api, key=key), body)

    def get(self, path: str, api: str | None = None) -> Request:
        headers = self.headers(api or self.api)
        return Request("GET", path, tuple(h for h in headers if h[0] != "content-type"))

    # ------------------------------------------------------------ sending
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = http.new_client(timeout_s=self.options.timeout_s)
        return self._client

    def send(self, req: Request, client: httpx.Client | None = None) -> Exchange:
        ex = http.send(client or self.client(), self.base, req)
        self.record([ex])
        return ex

    def record(self, exchanges: list[Exchange]) -> None:
        room = MAX_SEEN - len(self.seen)
        self.seen.extend(exchanges[: max(0, room)])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def bursts(self, rounds: list[list[Request]]) -> list[list[Exchange]]:
        deadline = time.monotonic() + self.options.check_time_s
        out = loadclient.bursts(
            self.base, rounds, timeout_s=self.options.timeout_s, deadline=deadline
        )
        for burst in out:
            self.record(burst)
        return out

    # ------------------------------------------------------------ measurements
    def once(self, key: str, make: Callable[[], T]) -> T:
        """`make()` the first time `key` is asked for; the same value afterwards."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def low_load(self) -> list[Exchange]:
        """Sequential streamed requests on one connection: the endpoint at rest."""
        if "low_load" not in self._cache:
            o = self.options
            req = self.generate(self.api, stream=True, max_tokens=4)
            deadline = time.monotonic() + o.check_time_s
            out = []
            for _ in range(o.low_load_requests):
                if time.monotonic() > deadline:
                    break
                out.append(self.send(req))
            self._cache["low_load"] = out
        return self._cache["low_load"]

    def baseline_ttft_ms(self) -> float | None:
        ttfts = sorted(
            (t - ex.t_send) / 1e6
            for ex in self.low_load()
            if classify(self.api, ex) == "admitted"
            and (t := first_token_time(self.api, ex)) is not None
        )
        return ttfts[len(ttfts) // 2] if ttfts else None

    def slope(self) -> list[SlopeStep]:
        """Bursts of `c` concurrent requests, `slope_rounds` times per step `c`."""
        if "slope" not in self._cache:
            o = self.options
            req = self.generate(self.api, stream=True, max_tokens=o.slope_max_tokens)
            # One session for every step, so connections opened at one step are reused
            # at the next; steps are cut at check_time_s.
            plan = [[req] * c for c in o.slope_steps for _ in range(o.slope_rounds)]
            done = self.bursts(plan)
            steps = []
            for i, c in enumerate(o.slope_steps):
                mine = done[i * o.slope_rounds : (i + 1) * o.slope_rounds]
                if not mine:
                    break
                flat = [ex for burst in mine for ex in burst]
                span = (max(ex.t_end for ex in flat) - min(ex.t_send for ex in flat)) / 1e9
                steps.append(SlopeStep(c, flat, span))
            self._cache["slope"] = steps
        return self._cache["slope"]

    def overload(self) -> Overload:
        """One burst of `overload_concurrency` requests, then sequential requests until
        `recovery_requests` in a row are admitted (or `recovery_s` passed)."""
        if "overload" not in self._cache:
            o = self.options
            baseline = self.baseline_ttft_ms()
            req = self.generate(self.api, stream=True, max_tokens=o.overload_max_tokens)
            (burst,) = self.bursts([[req] * o.overload_concurrency])
            t_end = time.monotonic()
            small = self.generate(self.api, stream=True, max_tokens=4)
            recovery: list[Exchange] = []
            in_a_row, recovered_at = 0, None
            while time.monotonic() - t_end < o.recovery_s + 1.0 and len(recovery) < 200:
                ex = self.send(small)
                recovery.append(ex)
                if classify(self.api, ex) == "admitted":
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
            self._cache["overload"] = Overload(burst, recovery, recovered_at, baseline)
        return self._cache["overload"]
