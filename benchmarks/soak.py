"""Soak: abandoned requests leave nothing behind, and SIGTERM always ends in time.

Part 1 (leaks). One sim-engine server; a baseline of its RSS, open fds and
`refserver_num_requests_in_flight` after a warm-up of complete requests; then, for each
kind below, `--requests` abandoned requests, `--concurrency` at a time, each on its own
connection, and the same three figures once the server settles (polled up to `--settle`
seconds: in-flight back to 0 and fds back to the baseline). All kinds run `--rounds`
times: RSS grows once, to the allocator's high-water mark, and must not grow again in
later rounds (a leak grows with every round).

    nonstream     a non-streaming request, the client gone 20 ms after sending it
    stream_early  a streaming request, the client gone 10 ms after sending, before its
                  first token (the sim prefill takes 50 ms)
    stream_mid    a streaming request, the client gone after its first text delta
    half_body     a head declaring 1000 bytes and 10 bytes of body, then gone
    idle          a connection that sends nothing and is never closed by the client
                  (all open at once): the server's --idle-timeout must close them

Part 2 (shutdown). For each state, a fresh server in that state gets SIGTERM; the time to
exit must stay within --drain-timeout + 2 s, whatever the clients do.

The sim engine is slowed (prefill 50 ms, decode 2 ms/token, 500 tokens) so that each kind
is abandoned at the stage it names. Linux only (/proc). Takes about a minute and a half:

    .venv/bin/python benchmarks/soak.py [--requests 1000] [--rounds 2] [--json soak.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reference_server.conftest import MODEL, Server, start_server

DRAIN_S = 2.0
IDLE_S = 5.0
SIM_COST = "sim:\n  prefill_base_ms: 50\n  decode_base_ms: 2\n  decode_per_seq_ms: 0\n"
MAX_TOKENS = 500
KINDS = ("nonstream", "stream_early", "stream_mid", "half_body", "idle")


@dataclass(frozen=True, slots=True)
class Figures:
    rss_mb: float
    fds: int
    in_flight: int


@dataclass(frozen=True, slots=True)
class LeakRow:
    round: int
    kind: str
    requests: int
    after: Figures
    settled_s: float | None  # None: not back to baseline within --settle


@dataclass(frozen=True, slots=True)
class StopRow:
    state: str
    exit_s: float | None  # None: still running 30 s after SIGTERM (then killed)
    code: int | None


def figures(server: Server) -> Figures:
    pid = server.proc.pid
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    text = httpx.get(server.url + "/metrics", timeout=10).text
    gauge = next(ln for ln in text.splitlines() if ln.startswith("refserver_num_requests_in_f"))
    return Figures(
        rss_mb=round(rss_kb / 1024, 1),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        in_flight=int(float(gauge.split()[1])) - 1,  # less the /metrics request itself
    )


def _request(stream: bool, max_tokens: int = MAX_TOKENS) -> bytes:
    body = json.dumps(
        {
            "model": MODEL,
            "max_tokens": max_tokens,
            "stream": stream,
            "messages": [{"role": "user", "content": "soak"}],
        }
    ).encode()
    head = (
        "POST /v1/messages HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


HALF_BODY = (
    b"POST /v1/messages HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n"
    b'content-length: 1000\r\n\r\n{"model": '
)


async def _abandon(host: str, port: int, kind: str) -> None:
    """One abandoned request of `kind`; the connection is reset when the client leaves."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if kind == "nonstream":
            writer.write(_request(False))
            await asyncio.sleep(0.02)
        elif kind == "stream_early":
            writer.write(_request(True))
            await asyncio.sleep(0.01)
        elif kind == "stream_mid":
            writer.write(_request(True))
            seen = b""
            while b"content_block_delta" not in seen:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                seen += chunk
        elif kind == "half_body":
            writer.write(HALF_BODY)
            await asyncio.sleep(0.01)
    finally:
        writer.close()
        with suppress(OSError):
            await writer.wait_closed()


async def _abandon_many(url: str, kind: str, n: int, concurrency: int) -> None:
    host, port = url.removeprefix("http://").split(":")
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await _abandon(host, int(port), kind)

    await asyncio.gather(*(one() for _ in range(n)))


async def _idle_many(server: Server, n: int, baseline: Figures, settle_s: float) -> float | None:
    """Open `n` silent connections and keep them: seconds until the server has closed its
    ends (fds back to the baseline), or None."""
    host, port = server.url.removeprefix("http://").split(":")
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(n)]
    try:
        return await asyncio.to_thread(_settle, server, baseline, settle_s)
    finally:
        for _, writer in conns:
            writer.close()


def _settle(server: Server, baseline: Figures, settle_s: float) -> float | None:
    """Seconds until in-flight is 0 and fds are back to the baseline, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < settle_s:
        now = figures(server)
        if now.in_flight == 0 and now.fds <= baseline.fds:
            return round(time.monotonic() - t0, 2)
        time.sleep(0.2)
    return None


def _warm_up(server: Server) -> None:
    body = {"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "w"}]}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for stream in (False, True) * 25:
            client.post("/v1/messages", json={**body, "stream": stream}).raise_for_status()


def soak(server: Server, args: argparse.Namespace) -> tuple[Figures, list[LeakRow]]:
    _warm_up(server)
    time.sleep(1.0)
    baseline = figures(server)
    rows = []
    for n, kind in ((n, kind) for n in range(1, args.rounds + 1) for kind in KINDS):
        if kind == "idle":
            settled = asyncio.run(_idle_many(server, args.requests, baseline, args.settle))
        else:
            asyncio.run(_abandon_many(server.url, kind, args.requests, args.concurrency))
            settled = _settle(server, baseline, args.settle)
        rows.append(LeakRow(n, kind, args.requests, figures(server), settled))
        print(f"  {rows[-1]}", flush=True)
    return baseline, rows


# ---- part 2: SIGTERM in every state ------------------------------------------------------

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _open(server: Server, first: bytes = b"") -> Conn:
    host, port = server.url.removeprefix("http://").split(":")
    conn = await asyncio.open_connection(host, int(port))
    conn[1].write(first)
    return conn


async def _kept_alive(server: Server) -> list[Conn]:
    conn = await _open(server, b"GET /health HTTP/1.1\r\nhost: soak\r\n\r\n")
    await conn[0].readuntil(b"}")  # the /health body; the connection stays open
    return [conn]


async def _abandoned(server: Server) -> list[Conn]:
    conn = await _open(server, _request(False, 2000))
    await asyncio.sleep(0.1)
    conn[1].close()
    return []


# state name -> what the clients do, holding the connections they return until the end
STATES: dict[str, Callable[[Server], Awaitable[list[Conn]]]] = {
    "no connections": lambda s: asyncio.sleep(0, []),
    "non-stream running (4 s)": lambda s: asyncio.gather(_open(s, _request(False, 2000))),
    "stream, client not reading": lambda s: asyncio.gather(_open(s, _request(True, 2000))),
    "half-sent body held": lambda s: asyncio.gather(_open(s, HALF_BODY)),
    "silent connection held": lambda s: asyncio.gather(_open(s)),
    "kept-alive connection idle": _kept_alive,
    "non-stream abandoned": _abandoned,
    "1000 silent connections": lambda s: asyncio.gather(*(_open(s) for _ in range(1000))),
}


async def _sigterm_in(server: Server, state: str) -> StopRow:
    conns = await STATES[state](server)
    await asyncio.sleep(0.5)  # let the server take every request in
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.to_thread(server.proc.wait, 30)
        exit_s: float | None = round(time.monotonic() - t0, 2)
    except subprocess.TimeoutExpired:  # recorded as None, then killed by server.stop()
        code, exit_s = None, None
    for _, writer in conns:
        writer.close()
    return StopRow(state, exit_s, code)


def shutdowns(server_args: list[str]) -> list[StopRow]:
    rows = []
    for state in STATES:
        server = start_server(*server_args)
        try:
            rows.append(asyncio.run(_sigterm_in(server, state)))
        finally:
            server.stop()
        print(f"  {rows[-1]}", flush=True)
    return rows


# ---- report ------------------------------------------------------------------------------


def report(baseline: Figures, leaks: list[LeakRow], stops: list[StopRow]) -> str:
    out = [
        "| round | abandoned kind | requests | RSS MB (baseline "
        f"{baseline.rss_mb}) | open fds ({baseline.fds}) | in flight (0) | settled in |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in leaks:
        settled = f"{r.settled_s} s" if r.settled_s is not None else "never"
        out.append(
            f"| {r.round} | {r.kind} | {r.requests} | {r.after.rss_mb} | {r.after.fds} | "
            f"{r.after.in_flight} | {settled} |"
        )
    out += ["", f"| state at SIGTERM (drain timeout {DRAIN_S:g} s) | exit after | code |"]
    out.append("|---|---|---|")
    for s in stops:
        took = f"{s.exit_s} s" if s.exit_s is not None else "> 30 s (killed)"
        out.append(f"| {s.state} | {took} | {s.code} |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1000, help="abandoned requests per kind")
    p.add_argument("--concurrency", type=int, default=16, help="abandoned at a time")
    p.add_argument("--rounds", type=int, default=2, help="times every kind is run")
    p.add_argument("--settle", type=float, default=30.0, help="seconds to wait for baseline")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "soak.yaml"
        config.write_text(SIM_COST)
        server_args = [
            *("--engine", "sim", "--config", str(config), "--max-batch-size", "32"),
            *("--drain-timeout", f"{DRAIN_S:g}", "--idle-timeout", f"{IDLE_S:g}"),
        ]
        print("part 1: abandoned requests", flush=True)
        server = start_server(*server_args)
        try:
            baseline, leaks = soak(server, args)
        finally:
            server.stop()
        print("part 2: SIGTERM", flush=True)
        stops = shutdowns(server_args)
    print(report(baseline, leaks, stops))
    if args.json:
        doc = {
            "baseline": asdict(baseline),
            "abandoned": [asdict(r) for r in leaks],
            "sigterm": [asdict(r) for r in stops],
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    late = [s for s in stops if s.exit_s is None or s.exit_s > DRAIN_S + 2]
    leaked = [r for r in leaks if r.settled_s is None]
    return 1 if late or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
