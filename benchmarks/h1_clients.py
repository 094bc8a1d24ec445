"""HTTP/1.1 transports side by side, open loop: aiohttp (`aiohttp_h1`) vs raw (`raw_h1`).

    .venv/bin/python benchmarks/h1_clients.py [--rates 2000,3000,4000,5000,6000,7000]
                                              [--seconds 5] [--kinds aiohttp,raw]

Target: the trivial granian server of benchmarks/loadgen.py, pinned to CPU 1. Each row is a
fresh child process pinned to CPU 0 (uvloop, GC frozen as the engine does) that drives one
transport the way `NativeWorker.run_open` does: a sleep-then-spin dispatcher (1.5 ms spin,
a yield every 32 sends when behind), one task per request, and per request the real
Anthropic dialect builds a unique POST (prompt, `x-request-id`) and parses the response.
Rates alternate the transport order so drift on this shared machine does not favour one.

Reported per row: achieved rate ((n-1) / span of t_send), send lag (t_send - t_intended)
p50/p99, latency (t_end - t_send) p50/p99 and errors, from a run with the spin on; and CPU
seconds (user+sys, getrusage over the measured window only) per 1000 requests from a second
run with the spin off that sends in batches of >= 1 ms: spinning (and uvloop's 1 ms timers,
which turn shorter sleeps into a busy wait) keeps the CPU busy between sends whatever the
transport costs, so measured that way CPU per request is just 1/rate.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SPIN_NS = 1_500_000  # NativeWorker's default spin before a due time (0: sleep only)
YIELD_EVERY = 32
PROMPT = "Say ok. " * 8


def make_transport(kind: str, url: str) -> Any:
    from zqbench.transport.base import PoolLimits

    limits = PoolLimits()  # the engine's defaults: up to 1024 connections, 8 warm
    if kind == "aiohttp":
        from zqbench.transport.aiohttp_h1 import AiohttpTransport

        return AiohttpTransport(url, limits)
    if kind == "raw":
        from zqbench.transport.raw_h1 import RawH1Transport

        return RawH1Transport(url, limits)
    raise ValueError(kind)


def pct(xs: list[int], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(q * len(xs) + 0.5) - 1))] / 1e6


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def drive(kind: str, url: str, rate: float, seconds: float, spin: int) -> dict[str, Any]:
    from zqbench.dialects import get_dialect
    from zqbench.dialects.base import DialectConfig, RequestSpec
    from zqbench.transport.base import Exchange, HttpRequest

    dialect = get_dialect("anthropic", DialectConfig(model="bench"))
    tr = make_transport(kind, url)
    await tr.open()
    lags: list[int] = []
    lats: list[int] = []
    sends: list[int] = []
    errors: dict[str, int] = {}
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, due: int) -> None:
        # As NativeWorker._request: a unique request and a fresh parser every time.
        rspec = RequestSpec("bench", f"{i:010d} {PROMPT}", 1, stream=False)
        built = dialect.build(rspec)
        req = HttpRequest(
            built.method, built.path, (*built.headers, ("x-request-id", f"zq-{i}")), built.body
        )
        parser = dialect.parser(rspec)
        ex = await tr.send(req, parser, 10.0, Exchange())
        if due:
            sends.append(ex.t_send)
            lags.append(ex.t_send - due)
            if ex.error is None:
                lats.append(ex.t_end - ex.t_send)
            else:
                key = ex.error.error_class
                errors[key] = errors.get(key, 0) + 1

    # Warm-up (not measured): code paths, pool and server caches.
    for _ in range(5):
        await asyncio.gather(*(one(-1, 0) for _ in range(8)))
    gc.collect()
    gc.freeze()  # as the engine does before the load: no full collection mid-run

    n = int(rate * seconds)
    loop = asyncio.get_running_loop()
    c0 = cpu_s()
    t0 = time.perf_counter_ns() + 20_000_000
    burst = 0
    for i in range(n):
        due = t0 + i * 1_000_000_000 // int(rate)
        if due > time.perf_counter_ns():
            burst = 0
            while (delta := due - time.perf_counter_ns()) > 0:
                if not spin:
                    # CPU pass: sleep at least 1 ms (uvloop's timer tick; a shorter sleep is a
                    # busy wait) and send what fell due meanwhile, so idle time is really idle.
                    await asyncio.sleep(max(delta / 1e9, 0.001))
                else:
                    await asyncio.sleep((delta - spin) / 1e9 if delta > spin else 0)
        else:
            burst += 1
            if burst % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        task = loop.create_task(one(i, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*tasks)
    cpu = cpu_s() - c0
    await tr.close()
    span = (max(sends) - min(sends)) / 1e9 if len(sends) > 1 else 0.0
    return {
        "kind": kind,
        "rate": rate,
        "sent": n,
        "achieved": (len(sends) - 1) / span if span else 0.0,
        "lag_p50_ms": pct(lags, 0.5),
        "lag_p99_ms": pct(lags, 0.99),
        "lat_p50_ms": pct(lats, 0.5),
        "lat_p99_ms": pct(lats, 0.99),
        "errors": errors,
        "cpu_per_1k": 1000 * cpu / n,
    }


def child(kind: str, url: str, rate: float, seconds: float, spin: int) -> None:
    try:
        import uvloop

        result = uvloop.run(drive(kind, url, rate, seconds, spin))
    except ImportError:
        result = asyncio.run(drive(kind, url, rate, seconds, spin))
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="2000,3000,4000,5000,6000,7000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--kinds", default="aiohttp,raw")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # kind url rate spin_ns
    args = ap.parse_args()
    if args.child:
        kind, url, rate, spin = args.child
        child(kind, url, float(rate), args.seconds, int(spin))
        return

    from benchmarks.loadgen import TrivialServer

    kinds = args.kinds.split(",")
    rows: list[dict[str, Any]] = []
    with TrivialServer() as server:
        for j, rate in enumerate(float(r) for r in args.rates.split(",")):
            for kind in kinds if j % 2 == 0 else kinds[::-1]:
                row = _child(kind, server.url, rate, args.seconds, SPIN_NS)
                quiet = _child(kind, server.url, rate, args.seconds, 0)
                if row is None or quiet is None:
                    continue
                row["cpu_per_1k"] = quiet["cpu_per_1k"]
                row["achieved_no_spin"] = quiet["achieved"]
                rows.append(row)
                print(f"  {kind:8} {rate:>6g}/s -> {row['achieved']:.0f}/s", file=sys.stderr)
    rows.sort(key=lambda r: (r["rate"], kinds.index(r["kind"])))
    print(f"\n{args.seconds:g} s per row, one process per row; CPU PSI {_psi()}\n")
    print("| transport | offered/s | achieved/s | lag p50 ms | lag p99 ms | lat p50 ms | "
          "lat p99 ms | errors | CPU s / 1k req (spin off) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        errs = sum(r["errors"].values())
        print(f"| {r['kind']} | {r['rate']:g} | {r['achieved']:.0f} | {r['lag_p50_ms']:.3f} | "
              f"{r['lag_p99_ms']:.3f} | {r['lat_p50_ms']:.2f} | {r['lat_p99_ms']:.2f} | "
              f"{errs} | {r['cpu_per_1k']:.3f} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def _child(kind: str, url: str, rate: float, seconds: float, spin: int) -> dict[str, Any] | None:
    from benchmarks.loadgen import taskset

    cmd = [*taskset(0), sys.executable, __file__, "--seconds", str(seconds)]
    cmd += ["--child", kind, url, str(rate), str(spin)]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        print(f"{kind} @ {rate:g}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _psi() -> str:
    try:
        return Path("/proc/pressure/cpu").read_text().split()[1]
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
