"""The floor under a streamed token's CPU cost: one socket read that does nothing else (#43).

    .venv/bin/python benchmarks/read_floor.py

A writer process on core 1 sends one SSE-sized event (about 100 bytes, one TCP segment with
TCP_NODELAY) to each of `--streams` loopback connections every `--interval-ms`; the reader,
on core 0 under uvloop as zqbench's workers run, reads each ready socket once and throws the
bytes away. Printed per read: user and system CPU (getrusage), and the TCP segments the
machine sent per read (/proc/net/snmp OutSegs: the writer's one plus the reader's ACKs).

Modes:
  loop-recv       the loop calls back per ready socket, `recv`: the loop's own transport
  loop-stamped    the same with `recvmsg` and SO_TIMESTAMPNS: zqbench's StampedTransport
  epoll-stamped   one `select.epoll` for every socket, read from one loop callback
  delayed-ack     loop-stamped on sockets with TCP_QUICKACK off (what it would save, and why
                  zqbench does not: docs/performance.md)

Each mode runs in a fresh reader process; `--rounds` alternates them (A B C D A B C D).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import select
import socket
import statistics
import sys
import time

SO_TIMESTAMPNS = 35
EVENT = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,'
    b'"model":"mock","choices":[{"index":0,"delta":{"content":" the"}}]}\n\n'
)
MODES = ("loop-recv", "loop-stamped", "epoll-stamped", "delayed-ack")


def out_segs() -> int:
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("OutSegs")])


def writer(port: int, streams: int, interval_s: float, seconds: float) -> None:
    """Sends EVENT to every connection each interval, on core 1, for `seconds`; then exits."""
    os.sched_setaffinity(0, {1})
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(streams)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = time.monotonic()
    end = t + seconds
    while t < end:
        for s in socks:
            s.send(EVENT)
        t += interval_s
        pause = t - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    os._exit(0)


def reader(mode: str, streams: int, interval_s: float, seconds: float) -> dict[str, float]:
    import uvloop

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(streams)
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        listener.close()
        writer(port, streams, interval_s, seconds + 1.5)
    os.sched_setaffinity(0, {0})
    conns = []
    for _ in range(streams):
        c, _ = listener.accept()
        c.setblocking(False)
        if mode != "loop-recv":
            c.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if mode == "delayed-ack":
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
        conns.append(c)
    anc = socket.CMSG_SPACE(16)
    reads = 0

    async def main() -> dict[str, float]:
        nonlocal reads
        loop = asyncio.get_running_loop()
        if mode == "epoll-stamped":
            ep = select.epoll()
            by_fd = {}
            for c in conns:
                ep.register(c.fileno(), select.EPOLLIN)
                by_fd[c.fileno()] = c.recvmsg

            def on_ready() -> None:
                nonlocal reads
                for fd, _ in ep.poll(0, 1024):
                    try:
                        by_fd[fd](65536, anc)
                    except BlockingIOError:
                        continue
                    reads += 1

            loop.add_reader(ep.fileno(), on_ready)
        else:
            stamped = mode != "loop-recv"
            for c in conns:

                def on_readable(c: socket.socket = c) -> None:
                    nonlocal reads
                    try:
                        if stamped:
                            c.recvmsg(65536, anc)
                        else:
                            c.recv(65536)
                    except BlockingIOError:
                        return
                    reads += 1

                loop.add_reader(c.fileno(), on_readable)
        await asyncio.sleep(1.0)  # connections settled, the writer in its stride
        r0, n0, s0 = resource.getrusage(resource.RUSAGE_SELF), reads, out_segs()
        await asyncio.sleep(seconds - 1.0)
        r1, n, segs = resource.getrusage(resource.RUSAGE_SELF), reads - n0, out_segs() - s0
        return {
            "reads": n,
            "user_us": (r1.ru_utime - r0.ru_utime) / n * 1e6,
            "sys_us": (r1.ru_stime - r0.ru_stime) / n * 1e6,
            "segs": segs / n,
        }

    result = uvloop.run(main())
    os.waitpid(pid, 0)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=250)
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a child's single run
    args = ap.parse_args()
    if os.cpu_count() is None or os.cpu_count() < 2:  # type: ignore[operator]
        print("read_floor: needs two cores (reader on 0, writer on 1)", file=sys.stderr)
        return 2
    if args.one:
        r = reader(args.one, args.streams, args.interval_ms / 1e3, args.seconds)
        print(" ".join(f"{k}={v}" for k, v in r.items()))
        return 0
    import subprocess

    results: dict[str, list[dict[str, float]]] = {m: [] for m in args.modes}
    for _ in range(args.rounds):
        for mode in args.modes:
            point = ["--streams", str(args.streams), "--interval-ms", str(args.interval_ms)]
            cmd = [sys.executable, __file__, "--one", mode, *point, "--seconds", str(args.seconds)]
            line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[mode].append({k: float(v) for k, v in (p.split("=") for p in line.split())})
    offered = args.streams * 1000 / args.interval_ms
    print(f"{args.streams} streams x {args.interval_ms:g} ms ({offered:,.0f} reads/s offered), "
          f"median of {args.rounds} rounds, microseconds a read:")  # fmt: skip
    print(f"{'mode':15s} {'user':>6s} {'system':>7s} {'total':>6s} {'segments':>9s}")
    for mode, rs in results.items():
        u = statistics.median(r["user_us"] for r in rs)
        s = statistics.median(r["sys_us"] for r in rs)
        g = statistics.median(r["segs"] for r in rs)
        print(f"{mode:15s} {u:6.2f} {s:7.2f} {u + s:6.2f} {g:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
