"""A client that hangs up frees its slot (zeroqueue.13): fill the slots with long streams, cut
them mid-generation, and see whether as many new requests get in at once.

    0. N new small requests at once, with every slot free: how long N first tokens take
       when they share a start (a batched prefill on a busy core), the TTFT the new
       requests of step 4 are held to.
    1. N streams at once (N = the capacity), each asking for `max_tokens` tokens; one that
       is refused is sent again every POLL_S (a slot of an earlier check may still be
       freeing) for at most half of `time_s`.
    2. Once each has streamed HANG_UP_TOKENS token events (it holds a slot and is
       generating), all N connections are closed at once: the hang-up.
    3. Where /metrics has a running gauge (capacity.RUNNING_GAUGES), it is read every POLL_S
       until it is back at its value before step 1, for at most `bound_s`.
       Without a gauge, SETTLE_S passes instead.
    4. N new small requests at once; a refused one is sent again every POLL_S until
       `bound_s` after the hang-up (each is sent at least once).

A server notices a hang-up when a write to the closed socket fails, or at its engine's next
step boundary: milliseconds. The wait before step 4 lets that pass, so the new requests meet
freed slots rather than a refusal that proves nothing (and that a server may count against
the client); the bound, not the wait, is what the check holds the server to. The pace of
each cut stream (its token events' spacing) says when it would have ended: a new request
admitted after that cannot tell a server that stopped generating from one that finished.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING

from zqbench.conform import capacity, loadclient, queueing
from zqbench.conform.evidence import Evidence, Request
from zqbench.metrics.classify import BASELINE_FACTOR
from zqbench.target.control import ControlClient
from zqbench.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from zqbench.conform.context import Sender
    from zqbench.conform.observations import Observations

HANG_UP_TOKENS = 4  # token events a stream shows before the hang-up: it is generating
POLL_S = 0.02  # resends and gauge reads: often enough for a bound of a second, not a flood
SETTLE_S = 0.05  # without a gauge: a few engine steps, a few failed writes


@dataclass(slots=True)
class GaugeTrace:
    name: str
    before: float  # the reading before the streams
    readings: list[tuple[float, float]] = field(default_factory=list)  # (s after hang-up, value)

    @property
    def fell_s(self) -> float | None:
        """Seconds from the hang-up to the first reading back at `before`."""
        return next((t for t, v in self.readings if v <= self.before), None)

    @property
    def peak(self) -> float | None:
        return max((v for _, v in self.readings), default=None)


@dataclass(slots=True)
class DisconnectRun:
    n: int
    max_tokens: int
    bound_s: float
    streams: list[list[Evidence]]  # per stream: its refused attempts, then the stream
    live: int  # streams generating at the hang-up
    t_hang_up: int = 0
    fresh: list[list[Evidence]] = field(default_factory=list)  # per new request: attempts
    at_once: list[Evidence] = field(default_factory=list)  # step 0: N at once on free slots
    gauge: GaugeTrace | None = None
    error: str | None = None  # no connection could be opened

    @property
    def cut(self) -> list[Evidence]:
        return [attempts[-1] for attempts in self.streams if attempts]

    @property
    def exchanges(self) -> list[Evidence]:
        return self.at_once + [ex for group in (*self.streams, *self.fresh) for ex in group]

    @property
    def admitted(self) -> list[Evidence]:
        """The new requests admitted (step 4), each its last attempt."""
        return [a[-1] for a in self.fresh if a[-1].admission == "admitted"]

    def would_run_s(self) -> float | None:
        """Seconds after the hang-up the first cut stream would have ended, at its own
        pace (token events are tokens on the OpenAI route; on the Messages route a delta
        may hold several, and the estimate runs long)."""
        ends = []
        for ex in self.cut:
            times = [] if ex.parsed is None else ex.parsed.summary.token_times
            if len(times) >= 2:
                gap = (times[-1] - times[0]) / (len(times) - 1)
                ends.append(times[-1] + (self.max_tokens - len(times)) * gap)
        return (min(ends) - self.t_hang_up) / 1e9 if ends else None


@dataclass(frozen=True)
class DisconnectRounds:
    first: DisconnectRun | None  # None: no capacity known, nothing measured
    again: DisconnectRun | None  # measured when the first round's new requests were slow


def measure(sender: Sender, obs: Observations) -> DisconnectRounds:
    """The disconnect phase: the steps of the docstring with N the capacity; nothing when it
    is unknown. A round whose new requests alone would fail zeroqueue.13 (a first token past
    T) is measured once more: the new requests of one round share a batch, and one stall of
    the server or of a busy client delays them all (vLLM on a shared core: 7 of 8 at 227 ms,
    T 213 ms, once in 4 runs); a slot a cut stream still holds delays every round."""
    known = obs.capacity()
    if known is None:
        return DisconnectRounds(None, None)
    n = min(known.value, capacity.MAX_CONCURRENCY // 2)  # 2 connections a slot
    first = _round(sender, n)
    if first.error is not None or first.live < first.n:
        return DisconnectRounds(first, None)
    if slowest_first_token(first, threshold_ms(obs.judgement(), first)) is None:
        return DisconnectRounds(first, None)
    return DisconnectRounds(first, _round(sender, n))


def _round(sender: Sender, n: int) -> DisconnectRun:
    """Steps 0-4 of the docstring, once: `long` asks for disconnect_max_tokens, `short` few."""
    t, o = sender.target, sender.target.options
    long = t.generate(t.api, stream=True, max_tokens=o.disconnect_max_tokens)
    short = t.generate(t.api, stream=True, max_tokens=4)
    base, timeout_s, time_s = t.base, o.timeout_s, o.check_time_s
    metrics_url = base + "/metrics"
    run = DisconnectRun(n, o.disconnect_max_tokens, o.disconnect_bound_s, [], 0)

    async def main(client: ControlClient) -> None:
        found = await asyncio.to_thread(capacity.scrape, client, metrics_url)
        if found is not None:
            run.gauge = GaugeTrace(*found)
        async with loadclient.pool(base, 2 * n) as transport:
            at_once = (loadclient.send(transport, short, timeout_s) for _ in range(n))
            run.at_once = list(await asyncio.gather(*at_once))
            hang_up = asyncio.Event()
            settled = [asyncio.Event() for _ in range(n)]
            open_until = perf_counter_ns() + int(time_s / 2 * 1e9)
            opening = [
                asyncio.ensure_future(
                    _open_one(transport, long, timeout_s, hang_up, settled[i], open_until)
                )
                for i in range(n)
            ]
            # A stream that never streams is not waited for past the bound: hang up on the rest.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(e.wait() for e in settled)), time_s / 2 + timeout_s
                )
            run.t_hang_up = perf_counter_ns()
            hang_up.set()
            opened = await asyncio.gather(*opening)
            run.streams = [attempts for attempts, _ in opened]
            run.live = sum(live for _, live in opened)
            if run.live < n:
                return
            deadline = run.t_hang_up + int(run.bound_s * 1e9)
            if run.gauge is not None:
                await _watch(client, metrics_url, run.gauge, run.t_hang_up, deadline)
            else:
                await asyncio.sleep(SETTLE_S)
            fresh = (_fresh_one(transport, short, timeout_s, deadline) for _ in range(n))
            run.fresh = list(await asyncio.gather(*fresh))

    with ControlClient(timeout_s=capacity.SCRAPE_TIMEOUT_S) as client:
        try:
            asyncio.run(main(client))
        except TransportError as exc:
            run.error = f"{exc.error_class}: {exc}"
    sender.record(run.exchanges)
    return run


async def _open_one(
    transport: Transport,
    long: Request,
    timeout_s: float,
    hang_up: asyncio.Event,
    settled: asyncio.Event,
    open_until: int,
) -> tuple[list[Evidence], bool]:
    """Step 1 for one stream: (its attempts, whether it was generating at the hang-up).
    `settled` is set once it streams, or once it will not (it ended, or never got in)."""
    attempts: list[Evidence] = []
    while True:
        ready = asyncio.Event()
        stream = asyncio.ensure_future(
            loadclient.stream_then_cancel(
                transport, long, timeout_s, tokens=HANG_UP_TOKENS, ready=ready, hang_up=hang_up
            )
        )
        await ready.wait()
        if not stream.done():  # generating: held until the hang-up
            settled.set()
            attempts.append(await stream)
            return attempts, True
        attempts.append(stream.result())
        if attempts[-1].admission == "admitted" or perf_counter_ns() > open_until:
            settled.set()
            return attempts, False
        await asyncio.sleep(POLL_S)


async def _fresh_one(
    transport: Transport, short: Request, timeout_s: float, deadline: int
) -> list[Evidence]:
    """Step 4 for one new request: sent, and sent again every POLL_S until `deadline`."""
    attempts = [await loadclient.send(transport, short, timeout_s)]
    while attempts[-1].admission != "admitted" and perf_counter_ns() < deadline:
        await asyncio.sleep(POLL_S)
        attempts.append(await loadclient.send(transport, short, timeout_s))
    return attempts


async def _watch(
    client: ControlClient, url: str, gauge: GaugeTrace, t0: int, deadline: int
) -> None:
    """Read the gauge every POLL_S until it is back at its value before, or `deadline`."""
    while True:
        found = await asyncio.to_thread(capacity.scrape, client, url)
        now = perf_counter_ns()
        if found is not None:
            gauge.readings.append((round((now - t0) / 1e9, 3), found[1]))
            if found[1] <= gauge.before:
                return
        if now >= deadline:
            return
        await asyncio.sleep(POLL_S)


def at_once_ttft_ms(run: DisconnectRun) -> float | None:
    """The median TTFT of the N requests sent at once on free slots (step 0)."""
    return queueing.median(queueing.admitted_ttfts(run.at_once))


def threshold_ms(judged: queueing.Judgement, run: DisconnectRun) -> float | None:
    """zeroqueue.5's T, 2 B + max(margin, H / 2) (queueing.py), with B the median TTFT of
    the N requests sent at once on free slots (step 0) where that is the longer: N first
    tokens that share a start share a prefill, and a one-core vLLM took 241 ms for 7 of 8
    of them against an at-rest 68 ms (T 222 ms). A slot a cut stream still holds adds
    the rest of its generation on top, which T still sees."""
    at_once, baseline = at_once_ttft_ms(run), judged.baseline_ms
    if judged.threshold_ms is None or at_once is None or baseline is None:
        return judged.threshold_ms
    return judged.threshold_ms + BASELINE_FACTOR * max(0.0, at_once - baseline)


def slowest_first_token(run: DisconnectRun, threshold: float | None) -> float | None:
    """The new requests' latest first token where it alone would fail zeroqueue.13 (every
    request admitted, the gauge back down, a TTFT past T), else None."""
    if threshold is None or (run.gauge is not None and run.gauge.fell_s is None):
        return None
    ttfts = queueing.admitted_ttfts(run.admitted)
    if len(run.admitted) < run.n or not ttfts or max(ttfts) <= threshold:
        return None
    return max(ttfts)
