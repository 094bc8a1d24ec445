"""Raw transport throughput and open-loop capacity: aiohttp HTTP/1.1 vs the h2 transport.

    .venv/bin/python benchmarks/transports.py [--duration 5] [--conc 10,64] [--rates 500,1000,2000]

The target is granian (1 worker, 1 runtime thread, `--http auto`: HTTP/1.1 and h2c prior
knowledge on one port) serving the trivial RSGI app below, started and stopped by PID. The
client runs on uvloop in this process. CPU is this process's user+system time
(resource.getrusage) over the measured window only, per 1000 requests.

closed: C coroutines each looping send() for the duration.
open:   a dispatcher sleeps to t0 + i/R (absolute times) and starts one task per request;
        latency is measured from the intended time (free of coordinated omission), `lag` is
        how late the send actually started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

BODY = b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":"ok"}]}\n'


async def app(scope, proto) -> None:  # type: ignore[no-untyped-def]
    """Trivial RSGI app: a fixed small JSON body."""
    proto.response_bytes(200, [("content-type", "application/json")], BODY)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_granian() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    root = Path(__file__).resolve().parents[1]
    granian = Path(sys.executable).with_name("granian")
    cmd = [
        str(granian), "--interface", "rsgi", "--workers", "1", "--runtime-threads", "1",
        "--http", "auto", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "benchmarks.transports:app",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("granian did not start")


class NullSink:
    __slots__ = ()

    def on_headers(self, status, headers, t_ns) -> None:  # type: ignore[no-untyped-def]
        pass

    def on_data(self, data, t_ns) -> None:  # type: ignore[no-untyped-def]
        pass

    def on_end(self, t_ns) -> None:  # type: ignore[no-untyped-def]
        pass


def make(kind: str, url: str, conns: int):  # type: ignore[no-untyped-def]
    from zqbench.transport.aiohttp_h1 import AiohttpTransport
    from zqbench.transport.base import PoolLimits
    from zqbench.transport.h2_client import H2Transport

    if kind == "aiohttp-h1":
        return AiohttpTransport(
            url, PoolLimits(max_connections=max(conns, 1), warm_connections=conns)
        )
    if kind == "h2":
        return H2Transport(url, PoolLimits(max_connections=4), connections=1)
    raise ValueError(kind)


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def pct(xs: list[int], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1e6


async def closed_loop(kind: str, url: str, conc: int, duration: float) -> dict[str, float]:
    from zqbench.transport.base import Exchange, HttpRequest

    tr = make(kind, url, conc)
    await tr.open()
    req = HttpRequest("GET", "/", ())
    sink = NullSink()
    lat: list[int] = []
    errors = 0
    stop = time.perf_counter() + duration

    async def worker() -> None:
        nonlocal errors
        while time.perf_counter() < stop:
            ex = await tr.send(req, sink, 10, Exchange())
            if ex.error is None:
                lat.append(ex.t_end - ex.t_send)
            else:
                errors += 1

    c0, t0 = cpu_s(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    await tr.close()
    n = len(lat) + errors
    return {"rps": n / wall, "cpu": 1000 * cpu / max(n, 1), "p50": pct(lat, 0.5),
            "p99": pct(lat, 0.99), "errors": errors, "lag99": float("nan")}  # fmt: skip


async def open_loop(kind: str, url: str, rate: float, duration: float) -> dict[str, float]:
    from zqbench.transport.base import Exchange, HttpRequest

    tr = make(kind, url, 64)
    await tr.open()
    req = HttpRequest("GET", "/", ())
    sink = NullSink()
    n = int(rate * duration)
    lat: list[int] = []
    lags: list[int] = []
    errors = 0
    tasks: set[asyncio.Task[None]] = set()

    async def one(t_intended: int) -> None:
        nonlocal errors
        ex = await tr.send(req, sink, 10, Exchange())
        lags.append(ex.t_send - t_intended)
        if ex.error is None:
            lat.append(ex.t_end - t_intended)
        else:
            errors += 1

    c0 = cpu_s()
    t0 = time.perf_counter_ns() + 10_000_000
    for i in range(n):
        due = t0 + int(i * 1e9 / rate)
        delay = (due - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(one(due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    wall = (time.perf_counter_ns() - t0) / 1e9
    cpu = cpu_s() - c0
    await tr.close()
    return {"rps": n / wall, "cpu": 1000 * cpu / n, "p50": pct(lat, 0.5), "p99": pct(lat, 0.99),
            "errors": errors, "lag99": pct(lags, 0.99)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--conc", default="10,64")
    ap.add_argument("--rates", default="500,1000,2000")
    ap.add_argument("--kinds", default="aiohttp-h1,h2")
    args = ap.parse_args()
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    proc, url = start_granian()
    rows = []
    try:
        for kind in args.kinds.split(","):
            for c in [int(x) for x in args.conc.split(",") if x]:
                rows.append((kind, f"closed C={c}", run(closed_loop(kind, url, c, args.duration))))
            for r in [float(x) for x in args.rates.split(",") if x]:
                rows.append((kind, f"open {r:g}/s", run(open_loop(kind, url, r, args.duration))))
    finally:
        proc.terminate()  # by PID
        proc.wait(10)
    print(f"\nduration {args.duration:g} s per row; CPU PSI: {_psi()}\n")
    print(
        "| transport | mode | req/s | CPU s /1k req | p50 ms | p99 ms | send lag p99 ms | errors |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, mode, m in rows:
        print(f"| {kind} | {mode} | {m['rps']:.0f} | {m['cpu']:.3f} | {m['p50']:.2f} | "
              f"{m['p99']:.2f} | {m['lag99']:.2f} | {m['errors']:.0f} |")  # fmt: skip


def _psi() -> str:
    try:
        return Path("/proc/pressure/cpu").read_text().split()[1]
    except OSError:
        return "n/a"


if __name__ == "__main__":
    main()
