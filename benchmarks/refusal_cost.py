"""What a refusal costs the reference server's one core: its CPU time per request.

    .venv/bin/python benchmarks/refusal_cost.py [--requests 3000]
        [--json docs/benchmarks/refusal-cost.json]

The embedded reference server (zero-queue, one slot) answers, from a client with 16
connections, in turn: `GET /health` (the cheapest route), `GET /nope` (an error, 404), and
streamed `POST /v1/messages` while long requests, one after another, hold the only slot,
so they are refused (529). The server's CPU time (user + system, /proc/PID/stat) over each
batch, divided by its requests, is what one such answer takes from the core the model's
steps run on; for the refusals, less what the held stream costs on its own (measured for
2 s before), divided by the refusals. The sim engine sleeps through its steps, so the
figures are the HTTP front end's alone. The `burst` scenario's pulse sends about 1000
requests a second, most of them refused: this is the share of the server's core those
refusals take.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from zqbench.target.embedded import EmbeddedServer  # noqa: E402

CONNECTIONS = 16
MESSAGE = {
    "model": "zq-reference",
    "stream": True,
    "messages": [{"role": "user", "content": "hi there"}],
}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def batch(
    client: httpx.AsyncClient, n: int, send: Callable[[httpx.AsyncClient], Awaitable[Any]]
) -> dict[int, int]:
    gate = asyncio.Semaphore(CONNECTIONS)
    codes: dict[int, int] = {}

    async def one() -> None:
        async with gate:
            r = await send(client)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1

    await asyncio.gather(*[one() for _ in range(n)])
    return codes


async def measure(url: str, pid: int, n: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=CONNECTIONS)
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        await batch(client, 200, lambda c: c.get("/health"))  # connections open, code warm
        kinds: list[tuple[str, Callable[[httpx.AsyncClient], Awaitable[Any]]]] = [
            ("health", lambda c: c.get("/health")),
            ("not_found", lambda c: c.get("/nope")),
        ]
        for name, send in kinds:
            before = cpu_s(pid)
            codes = await batch(client, n, send)
            out[name] = {"codes": codes, "cpu_us": (cpu_s(pid) - before) / n * 1e6}
        holding = asyncio.ensure_future(_hold(client))
        await asyncio.sleep(0.5)  # it holds the only slot
        # What the held stream itself costs (its tokens), per second, to take off below.
        before, t0 = cpu_s(pid), time.perf_counter()
        await asyncio.sleep(2.0)
        hold_rate = (cpu_s(pid) - before) / (time.perf_counter() - t0)
        before, t0 = cpu_s(pid), time.perf_counter()
        codes = await batch(
            client, n, lambda c: c.post("/v1/messages", json={**MESSAGE, "max_tokens": 16})
        )
        spent = cpu_s(pid) - before - hold_rate * (time.perf_counter() - t0)
        refused = codes.get(529, 0)
        out["refusal"] = {"codes": codes, "cpu_us": spent / max(refused, 1) * 1e6}
        out["hold_cpu_share"] = hold_rate
        holding.cancel()
    return out


async def _hold(client: httpx.AsyncClient) -> None:
    """Keep the only slot busy: one long stream after another (the context allows 2000
    tokens past the short prompt)."""
    while True:
        await client.post("/v1/messages", json={**MESSAGE, "max_tokens": 2000})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with EmbeddedServer(
        engine="sim", scheduler="zero-queue", max_batch_size=1, pin_cpus=True
    ) as server:
        assert server.pid is not None
        result = asyncio.run(measure(server.base_url, server.pid, args.requests))
    result = {"engine": "sim", "requests": args.requests, **result}
    for name in ("health", "not_found", "refusal"):
        r = result[name]
        print(f"{name:10s} {r['cpu_us']:6.0f} us of server CPU per request  {r['codes']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
