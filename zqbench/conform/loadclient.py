"""Bursts of concurrent requests for the load checks, over aiohttp.

The hidden-queue detector compares TTFT across offered loads, so the client's own cost per
request must stay small next to a decode step: aiohttp costs far less CPU per request than
httpx (../shared/research/loadgen-baseline.md), and with httpx a burst of 16 made the
*client* look like a queue. Each request still becomes one `Exchange`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import aiohttp
from aiohttp import client_exceptions as cx

from zqbench.conform.client import Exchange, Recorder, Request


def _error_class(exc: BaseException) -> str:
    if isinstance(exc, (cx.ClientConnectorError, cx.ConnectionTimeoutError)):
        return "connect"
    if isinstance(exc, (cx.ServerTimeoutError, asyncio.TimeoutError)):
        return "timeout"
    if isinstance(exc, (cx.ServerDisconnectedError, cx.ClientPayloadError, ConnectionError)):
        return "reset"
    if isinstance(exc, cx.ClientResponseError):
        return "protocol"
    return "transport"


async def _send(session: aiohttp.ClientSession, base: str, req: Request) -> Exchange:
    rec = Recorder(req)
    rec.start()
    try:
        async with session.request(
            req.method, base + req.path, headers=list(req.headers), data=req.body or None
        ) as resp:
            version = f"HTTP/{resp.version.major}.{resp.version.minor}" if resp.version else ""
            rec.head(resp.status, version, resp.headers.items())
            async for data in resp.content.iter_any():
                rec.chunk(data)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return rec.end(_error_class(exc))
    return rec.end()


def bursts(
    base: str,
    rounds: Sequence[Sequence[Request]],
    *,
    timeout_s: float,
    deadline: float,
) -> list[list[Exchange]]:
    """Each round's requests sent at once; the next round starts when this one has ended.

    One session (keep-alive pool) for all rounds. Rounds that would start after `deadline`
    (time.monotonic) are not sent, so the result may be shorter than `rounds`."""

    async def main() -> list[list[Exchange]]:
        width = max((len(r) for r in rounds), default=1)
        connector = aiohttp.TCPConnector(limit=width, force_close=False)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        out = []
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, auto_decompress=False, trust_env=False
        ) as session:
            for reqs in rounds:
                if time.monotonic() > deadline:
                    break
                out.append(list(await asyncio.gather(*(_send(session, base, r) for r in reqs))))
        return out

    return asyncio.run(main())
