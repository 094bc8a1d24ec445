"""Bursts of concurrent requests for the load checks, over zqbench's own load transport.

The hidden-queue detector compares TTFT across offered loads, so the client's own cost per
request must stay small next to a decode step: with httpx a burst of 16 made the *client*
look like a queue. The raw HTTP/1.1 transport `zqbench run` measures with
(`zqbench.transport.factory`, docs/performance.md) is the cheapest client zqbench has, and it
stamps every piece when it is read. Each request still becomes one `Evidence`, recorded by
its `Recorder` (the transport's sink).

`bursts` serves zeroqueue.5-10; `pool` and `send` are the pieces zeroqueue.12-13 (retry.py,
disconnect.py) schedule their own requests with, and `stream_then_cancel` the one way a
check hangs up on a stream mid-generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from time import perf_counter_ns
from typing import TYPE_CHECKING

from zqbench.conform.evidence import Evidence, Recorder, Request
from zqbench.transport.base import Cancelled, PoolLimits, Transport, TransportError
from zqbench.transport.base import Exchange as Sent
from zqbench.transport.factory import make_transport

if TYPE_CHECKING:
    from zqbench.conform.context import Sender


async def send(transport: Transport, req: Request, timeout_s: float) -> Evidence:
    rec = Recorder(req)
    return rec.finish(await transport.send(req.http, rec, timeout_s, Sent()))


@contextlib.asynccontextmanager
async def pool(base: str, width: int) -> AsyncIterator[Transport]:
    """The load transport with `width` connections opened before the first request (a
    connect inside a measured request would add to its TTFT). Raises TransportError when
    the endpoint cannot be reached."""
    limits = PoolLimits(max_connections=width, warm_connections=width)
    transport = make_transport(base, http2=False, limits=limits)
    await transport.open()
    try:
        yield transport
    finally:
        await transport.close()


class _Watched(Recorder):
    """A Recorder that sets `ready` once the answer has streamed `tokens` token events."""

    def __init__(self, req: Request, tokens: int, ready: asyncio.Event) -> None:
        super().__init__(req)
        self.tokens, self.ready = tokens, ready

    def on_data(self, data: bytes, t_ns: int) -> None:
        super().on_data(data, t_ns)
        if self.parser is not None and self.parser.summary.token_events >= self.tokens:
            self.ready.set()


async def stream_then_cancel(
    transport: Transport,
    req: Request,
    timeout_s: float,
    *,
    tokens: int,
    ready: asyncio.Event,
    hang_up: asyncio.Event,
) -> Evidence:
    """Stream `req`; set `ready` once `tokens` token events arrived, or once it ended (a
    refusal, say: the evidence is then complete when `ready` is seen). When `hang_up` is
    set, close its connection mid-answer, as a client that goes away does: the raw
    transport aborts a connection whose response is unfinished, so the server sees the
    socket close. A stream cut short has `error` "interrupted" and `t_end` the moment of
    the hang-up."""
    rec = _Watched(req, tokens, ready)
    sent = Sent()
    task = asyncio.ensure_future(transport.send(req.http, rec, timeout_s, sent))
    waiter = asyncio.ensure_future(hang_up.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    ready.set()  # ended before it streamed `tokens`: nothing more to wait for
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sent.t_end = perf_counter_ns()
        sent.error = Cancelled("the check hung up mid-answer")
    waiter.cancel()
    return rec.finish(sent)


def _unsent(reqs: Sequence[Request], error: TransportError) -> list[Evidence]:
    """The round that could not start (no connection): each request failed with `error`."""
    t = perf_counter_ns()
    return [Recorder(r).finish(Sent(t_send=t, t_end=t, error=error)) for r in reqs]


def bursts(
    sender: Sender, steps: Sequence[Sequence[Sequence[Request]]]
) -> list[list[list[Evidence]]]:
    """Each step's rounds one after another, each round's requests sent at once; the next
    round starts when this one has ended. Every exchange is recorded on `sender`.

    One keep-alive pool for every step, warmed to the widest round before the first one,
    so no connect lands in a measured TTFT (unless the server closed one). Each step is one
    measurement, bounded on its own: its rounds that would start `check_time_s` or more
    after its first round are not sent, so a step may hold fewer rounds than asked (never
    none)."""
    o = sender.target.options

    async def main() -> list[list[list[Evidence]]]:
        # Every connection the widest round needs is opened first: a connect inside a
        # measured round would add to its TTFT, and on a busy machine stall a whole round.
        width = max((len(r) for rounds in steps for r in rounds), default=1)
        out: list[list[list[Evidence]]] = []
        async with pool(sender.target.base, width) as transport:
            for rounds in steps:
                deadline = time.monotonic() + o.check_time_s
                done: list[list[Evidence]] = []
                for reqs in rounds:
                    if done and time.monotonic() > deadline:
                        break
                    sent = asyncio.gather(*(send(transport, r, o.timeout_s) for r in reqs))
                    done.append(list(await sent))
                out.append(done)
        return out

    try:
        out = asyncio.run(main())
    except TransportError as exc:  # no connection: the round that could not start
        first = next((rounds[0] for rounds in steps if rounds), None)
        out = [[_unsent(first, exc)]] if first is not None else []
    for step in out:
        for burst in step:
            sender.record(burst)
    return out
