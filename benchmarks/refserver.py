"""Measure the reference server's server_queue and dispatch_delay at 50% and 90% of capacity.

For each engine (sim, CPU torch) and scheduler (zero-queue, fifo): start the server,
estimate capacity as slots / (latency of one request alone), then drive Poisson
arrivals at 50% and 90% of it for a fixed time and report p50/p99 of

    server_queue   = X-Request-Dispatch-Time - X-Request-Received-Time   (server clock)
    dispatch_delay = X-Request-Start-Time - client send time (epoch)     (same host)

plus the refusal share. Non-streaming Messages calls over pre-opened raw HTTP/1.1
connections, so the client's own cost stays out of the figures.

    .venv/bin/python benchmarks/refserver.py [--engines sim,torch] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reference_server.conftest import MODEL, start_server

MAX_TOKENS = 32
SLOTS = 4


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def _one(host: str, port: int, body: bytes) -> tuple[int, float, dict[str, str]]:
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    sent = time.time()
    writer.write(head + body)
    data = await reader.read()
    writer.close()
    lines = data.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), sent, headers


async def _run(url: str, rate: float, seconds: float) -> list[tuple[int, float, dict[str, str]]]:
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(
        {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": "b"}]}
    ).encode()
    rng = random.Random(0)
    t0 = time.perf_counter()
    intended, tasks = 0.0, []
    while intended < seconds:
        intended += rng.expovariate(rate)
        delay = t0 + intended - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(host, int(port), body)))
    return list(await asyncio.gather(*tasks))


def measure(engine: str, scheduler: str, seconds: float) -> list[str]:
    extra = ["--device", "cpu", "--preset", "tiny", "--max-concurrent-kernels", "1"]
    server = start_server(
        "--engine", engine, "--scheduler", scheduler, "--max-batch-size", str(SLOTS),
        "--max-context", "256", "--retry-after", "0", *(extra if engine == "torch" else []),
        wait_s=180,
    )  # fmt: skip
    rows = []
    try:
        asyncio.run(_run(server.url, 1000.0, 0.001))  # warm-up, one request
        t = time.perf_counter()
        asyncio.run(_run(server.url, 1000.0, 0.001))
        service = time.perf_counter() - t
        capacity = SLOTS / service
        for load in (0.5, 0.9):
            res = asyncio.run(_run(server.url, load * capacity, seconds))
            ok = [(s, h) for s, _, h in res if s == 200]
            sq = [
                float(h["x-request-dispatch-time"]) - float(h["x-request-received-time"])
                for _, h in ok
            ]
            dd = [float(h["x-request-start-time"]) - sent for s, sent, h in res if s == 200]
            refused = 1 - len(ok) / len(res)
            rows.append(
                f"| {engine} | {scheduler} | {load:.0%} ({load * capacity:.0f}/s) | {len(res)} "
                f"| {_pct(sq, 0.5) * 1e6:.0f} | {_pct(sq, 0.99) * 1e6:.0f} "
                f"| {_pct(dd, 0.5) * 1e6:.0f} | {_pct(dd, 0.99) * 1e6:.0f} | {refused:.1%} |"
            )
            print(rows[-1], flush=True)
    finally:
        server.stop()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="sim,torch")
    p.add_argument("--seconds", type=float, default=8.0)
    args = p.parse_args()
    print(
        "| engine | scheduler | load | requests | server_queue p50 us | p99 us "
        "| dispatch_delay p50 us | p99 us | refused |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for engine in args.engines.split(","):
        for scheduler in ("zero-queue", "fifo"):
            measure(engine, scheduler, args.seconds)
    print(f"(slots={SLOTS}, max_tokens={MAX_TOKENS}, capacity = slots / solo latency)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
