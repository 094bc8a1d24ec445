"""Bursts of concurrent requests for the load checks, over zqbench's own load transport.

The hidden-queue detector compares TTFT across offered loads, so the client's own cost per
request must stay small next to a decode step: with httpx a burst of 16 made the *client*
look like a queue. The raw HTTP/1.1 transport `zqbench run` measures with
(`zqbench.transport.factory`, docs/performance.md) is the cheapest client zqbench has, and it
stamps every piece when it is read. Each request still becomes one `Evidence`, recorded by
its `Recorder` (the transport's sink).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from time import perf_counter_ns

from zqbench.conform.evidence import Evidence, Recorder, Request
from zqbench.transport.base import Exchange as Sent
from zqbench.transport.base import PoolLimits, Transport, TransportError
from zqbench.transport.factory import make_transport


async def _send(transport: Transport, req: Request, timeout_s: float) -> Evidence:
    rec = Recorder(req)
    return rec.finish(await transport.send(req.http, rec, timeout_s, Sent()))


def _unsent(reqs: Sequence[Request], error: TransportError) -> list[Evidence]:
    """The round that could not start (no connection): each request failed with `error`."""
    t = perf_counter_ns()
    return [Recorder(r).finish(Sent(t_send=t, t_end=t, error=error)) for r in reqs]


def bursts(
    base: str,
    steps: Sequence[Sequence[Sequence[Request]]],
    *,
    timeout_s: float,
    step_time_s: float,
) -> list[list[list[Evidence]]]:
    """Each step's rounds one after another, each round's requests sent at once; the next
    round starts when this one has ended.

    One keep-alive pool for every step, warmed to the widest round before the first one,
    so no connect lands in a measured TTFT (unless the server closed one). Each step is one
    measurement, bounded on its own: its rounds that would start `step_time_s` or more
    after its first round are not sent, so a step may hold fewer rounds than asked (never
    none)."""

    async def main() -> list[list[list[Evidence]]]:
        # Every connection the widest round needs is opened first: a connect inside a
        # measured round would add to its TTFT, and on a busy machine stall a whole round.
        width = max((len(r) for rounds in steps for r in rounds), default=1)
        limits = PoolLimits(max_connections=width, warm_connections=width)
        transport = make_transport(base, http2=False, limits=limits)
        try:
            await transport.open()
        except TransportError as exc:
            first = next((rounds[0] for rounds in steps if rounds), None)
            return [[_unsent(first, exc)]] if first is not None else []
        out: list[list[list[Evidence]]] = []
        try:
            for rounds in steps:
                deadline = time.monotonic() + step_time_s
                done: list[list[Evidence]] = []
                for reqs in rounds:
                    if done and time.monotonic() > deadline:
                        break
                    sent = asyncio.gather(*(_send(transport, r, timeout_s) for r in reqs))
                    done.append(list(await sent))
                out.append(done)
        finally:
            await transport.close()
        return out

    return asyncio.run(main())
