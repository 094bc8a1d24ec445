"""The reference server's server_queue and dispatch_delay at 50% and 90% of its capacity.

For each engine (sim, CPU torch tiny):

1. Capacity. Start a zero-queue server and sweep the arrival rate upwards (x1.25 per
   step, `--sweep-seconds` each, then two bisection steps) to find the knee: the highest
   rate it serves with under 1% refusals. Zero-queue refuses instead of queueing, so the
   refusal share is a direct overload signal.
2. Load. Offer 50% and 90% of that rate to the zero-queue server and to a fifo server
   (same engine, same slots) for `--seconds` each, and report p50/p99 of

    server_queue   = X-Request-Dispatch-Time - X-Request-Received-Time   (server clock)
    dispatch_delay = X-Request-Start-Time - client send time (epoch)     (same host)

   and the refusal share.

Load generator: our own open loop (not `zqbench run`): send times are computed up front
(uniform spacing by default, as zqbench's and k6's default; `--arrivals poisson` for
exponential gaps), each request is a non-streaming Messages call on a connection opened
just before its send, so connection setup stays out of the figures. It runs in this one
process, which keeps a sweep step to a few seconds (a zqbench run per step would add its
own start-up and output writing each time).

    .venv/bin/python benchmarks/refserver.py [--engines sim,torch] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reference_server.conftest import MODEL, Server, start_server

MAX_TOKENS = 32
SLOTS = 4
KNEE_REFUSALS = 0.01  # the knee: the highest rate with fewer refusals than this


@dataclass(frozen=True, slots=True)
class Result:
    rate: float  # offered requests per second
    requests: int
    refused: float  # share of requests refused (any non-200)
    sq_p50_us: float | None
    sq_p99_us: float | None
    dd_p50_us: float | None
    dd_p99_us: float | None


def percentile(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1); None for no data (never 0)."""
    if not xs:
        return None
    ordered = sorted(xs)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


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


def schedule(rate: float, seconds: float, arrivals: str, seed: int = 0) -> list[float]:
    """Send offsets in seconds: uniform (i / rate) or Poisson (exponential gaps)."""
    if arrivals == "uniform":
        return [i / rate for i in range(1, int(rate * seconds) + 1)]
    rng, t, out = random.Random(seed), 0.0, list[float]()
    while True:
        t += rng.expovariate(rate)
        if t > seconds:
            return out
        out.append(t)


async def _drive(url: str, offsets: list[float]) -> list[tuple[int, float, dict[str, str]]]:
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(
        {"model": MODEL, "max_tokens": MAX_TOKENS, "messages": [{"role": "user", "content": "b"}]}
    ).encode()
    t0 = time.perf_counter()
    tasks = []
    for offset in offsets:  # absolute send times: a slow send never shifts the later ones
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_one(host, int(port), body)))
    return list(await asyncio.gather(*tasks))


def offer(url: str, rate: float, seconds: float, arrivals: str) -> Result:
    res = asyncio.run(_drive(url, schedule(rate, seconds, arrivals)))
    ok = [(sent, h) for status, sent, h in res if status == 200]
    sq = [float(h["x-request-dispatch-time"]) - float(h["x-request-received-time"]) for _, h in ok]
    dd = [float(h["x-request-start-time"]) - sent for sent, h in ok]

    def us(x: float | None) -> float | None:
        return None if x is None else round(x * 1e6, 1)

    return Result(
        rate=round(rate, 2),
        requests=len(res),
        refused=1 - len(ok) / len(res) if res else 0.0,
        sq_p50_us=us(percentile(sq, 0.5)),
        sq_p99_us=us(percentile(sq, 0.99)),
        dd_p50_us=us(percentile(dd, 0.5)),
        dd_p99_us=us(percentile(dd, 0.99)),
    )


def find_knee(url: str, seconds: float, arrivals: str, log: list[Result]) -> float:
    """The highest offered rate with under KNEE_REFUSALS refused (geometric sweep, bisection)."""
    t = time.perf_counter()
    asyncio.run(_drive(url, [0.0]))
    solo = time.perf_counter() - t
    rate = 0.25 * SLOTS / solo  # well below the optimistic slots / solo-latency bound
    good, bad = 0.0, math.inf
    for _ in range(20):  # bounded: x1.25 per step covers 0.25x..20x of the start
        r = offer(url, rate, seconds, arrivals)
        log.append(r)
        print(f"  sweep {rate:7.1f}/s  refused {r.refused:6.1%}  ({r.requests} requests)")
        if r.refused >= KNEE_REFUSALS:
            bad = rate
            break
        good, rate = rate, rate * 1.25
    if good == 0.0:
        raise RuntimeError(f"even {bad:.1f}/s was refused more than {KNEE_REFUSALS:.0%}")
    for _ in range(2):  # bisection between the last good and the first bad rate
        if bad == math.inf:
            break
        mid = (good + bad) / 2
        r = offer(url, mid, seconds, arrivals)
        log.append(r)
        print(f"  bisect {mid:6.1f}/s  refused {r.refused:6.1%}  ({r.requests} requests)")
        good, bad = (mid, bad) if r.refused < KNEE_REFUSALS else (good, mid)
    return good


def _server(engine: str, scheduler: str) -> Server:
    torch_args = ["--device", "cpu", "--preset", "tiny", "--max-concurrent-kernels", "1"]
    return start_server(
        "--engine", engine, "--scheduler", scheduler, "--max-batch-size", str(SLOTS),
        "--max-context", "256", "--retry-after", "0", *(torch_args if engine == "torch" else []),
        wait_s=180,
    )  # fmt: skip


def run_engine(engine: str, args: argparse.Namespace) -> dict:
    out: dict = {"engine": engine, "sweep": [], "rows": []}
    for scheduler in ("zero-queue", "fifo"):
        server = _server(engine, scheduler)
        try:
            asyncio.run(_drive(server.url, [i / 50 for i in range(10)]))  # warm-up
            if scheduler == "zero-queue":
                sweep: list[Result] = []
                out["knee_rps"] = round(find_knee(server.url, args.sweep_seconds,
                                                  args.arrivals, sweep), 2)  # fmt: skip
                out["sweep"] = [asdict(r) for r in sweep]
                print(f"  {engine}: capacity (knee) {out['knee_rps']:.1f} req/s")
            for load in (0.5, 0.9):
                r = offer(server.url, load * out["knee_rps"], args.seconds, args.arrivals)
                row = {"scheduler": scheduler, "load": load, **asdict(r)}
                out["rows"].append(row)
                print(table_row(engine, row), flush=True)
        finally:
            server.stop()
    return out


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


def table_row(engine: str, row: dict) -> str:
    return (
        f"| {engine} | {row['scheduler']} | {row['load']:.0%} ({row['rate']:.1f}/s) "
        f"| {row['requests']} | {_f(row['sq_p50_us'])} | {_f(row['sq_p99_us'])} "
        f"| {_f(row['dd_p50_us'])} | {_f(row['dd_p99_us'])} | {row['refused']:.1%} |"
    )


TABLE_HEAD = (
    "| engine | scheduler | load (rate) | requests | server_queue p50 us | p99 us "
    "| dispatch_delay p50 us | p99 us | refused |\n|---|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engines", default="sim,torch")
    p.add_argument("--seconds", type=float, default=8.0, help="per load point")
    p.add_argument("--sweep-seconds", type=float, default=3.0, help="per capacity sweep step")
    p.add_argument("--arrivals", choices=("uniform", "poisson"), default="uniform")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    t0 = time.perf_counter()
    results = [run_engine(e, args) for e in args.engines.split(",")]
    print(f"\nslots={SLOTS}, max_tokens={MAX_TOKENS}, arrivals={args.arrivals}, "
          f"{time.perf_counter() - t0:.0f} s\n")  # fmt: skip
    for res in results:
        print(f"{res['engine']}: capacity (knee, < {KNEE_REFUSALS:.0%} refused by zero-queue) "
              f"{res['knee_rps']:.1f} req/s")  # fmt: skip
    print("\n" + TABLE_HEAD)
    for res in results:
        for row in res["rows"]:
            print(table_row(res["engine"], row))
    if args.json is not None:
        config = {"slots": SLOTS, "max_tokens": MAX_TOKENS, "arrivals": args.arrivals,
                  "seconds": args.seconds, "sweep_seconds": args.sweep_seconds}  # fmt: skip
        doc = {"schema": "zqbench.refserver_bench/1", "config": config, "engines": results}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
