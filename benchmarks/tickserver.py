"""Build, start and read back benchmarks/tickserver.c, the token-tick mock server (#43 item 1).

The server (C, one thread, epoll) writes one token event to every open stream every
`interval_us` and stamps each write with CLOCK_MONOTONIC, the clock of Python's
`perf_counter_ns()` and of zqbench's samples; HTTP/1.1, and h2c on the same port where
libnghttp2's headers are installed (`TickServer.h2c`). `TickServer` compiles it with
`gcc -O2` into a temporary folder, starts it pinned to one core (`taskset -c CPU`; under
SCHED_FIFO with `chrt -f 50` when `realtime`, so that other jobs on a shared machine cannot
delay its ticks) and stops it by its PID (SIGTERM: it flushes its logs and exits).
`ServerLog` reads what it wrote: every token write, every request, every tick.

    with TickServer(interval_us=5000, tokens=100) as srv:
        ...  # point a client at srv.url
    log = srv.log()  # ServerLog: .tokens, .requests, .ticks

`python benchmarks/tickserver.py --streams 250 --interval-ms 5` measures the server alone
with its own C client (`tickserver sink`, on the other core): its tick lateness p50/p99.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = Path(__file__).with_name("tickserver.c")
TOKEN_DTYPE = np.dtype([("seq", "<u4"), ("idx", "<u4"), ("t", "<i8")])
DEFERRED = np.uint32(1 << 31)


def build(folder: Path) -> Path:
    """Compile tickserver.c into `folder`; return the binary's path."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("no C compiler: apt-get install -y gcc")
    exe = folder / "tickserver"
    plain = [gcc, "-O2", "-Wall", "-o", str(exe), str(SOURCE)]
    # h2c needs libnghttp2's headers (apt-get install libnghttp2-dev); without them the server
    # speaks HTTP/1.1 only, and `speaks_h2c` says so.
    if subprocess.run([*plain, "-DTICK_H2", "-lnghttp2"], capture_output=True).returncode:
        subprocess.run(plain, check=True, capture_output=True)
    return exe


def speaks_h2c(exe: Path) -> bool:
    """The binary was built with HTTP/2 (h2c with prior knowledge, on the same port)."""
    out = subprocess.run([str(exe), "features"], capture_output=True, text=True, check=True)
    return "h2c" in out.stdout.split()


def pinned(cpu: int | None) -> list[str]:
    if cpu is None or shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        return []
    return ["taskset", "-c", str(cpu)]


def can_realtime() -> bool:
    if shutil.which("chrt") is None:
        return False
    probe = subprocess.run(["chrt", "-f", "50", "true"], capture_output=True, check=False)
    return probe.returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerLog:
    """What one server run wrote. Times are CLOCK_MONOTONIC ns."""

    tokens: np.ndarray  # TOKEN_DTYPE: seq, idx (bit 31: deferred), t
    requests: list[dict[str, Any]]  # seq, x_request_id, api, tokens, t_recv_ns, t_head_ns
    ticks: np.ndarray  # (n, 4) int64: deadline, lateness, writes, streams written

    def per_request(self) -> dict[int, np.ndarray]:
        """seq -> its token write times in token order (complete or not)."""
        toks = self.tokens
        order = np.lexsort((toks["idx"] & ~DEFERRED, toks["seq"]))
        toks = toks[order]
        seqs = toks["seq"]
        bounds = np.flatnonzero(np.diff(seqs)) + 1
        out: dict[int, np.ndarray] = {}
        for chunk in np.split(toks, bounds):
            if len(chunk):
                out[int(chunk["seq"][0])] = chunk["t"]
        return out

    def deferred(self) -> int:
        return int(np.count_nonzero(self.tokens["idx"] & DEFERRED))

    def tick_stats(self, min_streams: int = 1) -> dict[str, float]:
        """Tick lateness (handled minus due) and write spread (handled to last write), ms,
        over the ticks that wrote to at least `min_streams` streams."""
        t = self.ticks[self.ticks[:, 3] >= min_streams]
        if len(t) == 0:
            return {}
        late, spread = t[:, 1] / 1e6, t[:, 2] / 1e6
        return {
            "ticks": len(t),
            "lateness_p50_ms": round(float(np.percentile(late, 50)), 4),
            "lateness_p99_ms": round(float(np.percentile(late, 99)), 4),
            "lateness_max_ms": round(float(late.max()), 4),
            "write_spread_p50_ms": round(float(np.percentile(spread, 50)), 4),
            "write_spread_p99_ms": round(float(np.percentile(spread, 99)), 4),
            "streams_per_tick_p50": float(np.percentile(t[:, 3], 50)),
        }


@dataclass
class TickServer:
    interval_us: int = 5000
    tokens: int = 100  # per request when the body names no max_tokens
    cpu: int | None = 1
    realtime: bool = True  # chrt -f 50 when the machine allows it
    max_seconds: float = 3600.0  # the server stops itself after this long, whatever happens
    token_text: str = " the"
    folder: Path | None = None  # where the binary and the logs go (default: a temp dir)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    h2c: bool = False  # set on start: the binary speaks h2c too
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def prefix(self) -> Path:
        assert self.folder is not None
        return self.folder / "server"

    def __enter__(self) -> TickServer:
        if self.folder is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tickserver-")
            self.folder = Path(self._tmp.name)
        self.folder.mkdir(parents=True, exist_ok=True)
        exe = build(self.folder)
        self.h2c = speaks_h2c(exe)
        prio = ["chrt", "-f", "50"] if self.realtime and can_realtime() else []
        self.realtime = bool(prio)
        cmd = [
            *prio,
            *pinned(self.cpu),
            str(exe),
            "serve",
            str(self.port),
            str(self.interval_us),
            str(self.tokens),
            str(self.prefix),
            str(self.max_seconds),
            self.token_text,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tickserver did not start: {cmd}")

    def stop(self) -> str:
        """SIGTERM by PID, wait (bounded); return its stderr (the written/deferred counts)."""
        if self.proc is None:
            return ""
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            _, err = proc.communicate(timeout=5)
        return err.decode(errors="replace").strip()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def log(self) -> ServerLog:
        """The logs of the run so far (call after stop(): the server buffers them)."""
        p = self.prefix
        tokens = np.fromfile(f"{p}.tokens", dtype=TOKEN_DTYPE)
        with open(f"{p}.requests", newline="") as f:
            rows = [
                {k: (v if k in ("x_request_id", "api") else int(v)) for k, v in r.items()}
                for r in csv.DictReader(f)
            ]
        ticks = np.fromfile(f"{p}.ticks", dtype=np.int64).reshape(-1, 4)
        return ServerLog(tokens=tokens, requests=rows, ticks=ticks)


def sink(srv: TickServer, streams: int, tokens: int, seconds: float, api: str) -> dict[str, Any]:
    """Drive `srv` with its own C client (closed loop, `streams` connections) on CPU 0."""
    assert srv.folder is not None
    cmd = [
        *pinned(0),
        str(srv.folder / "tickserver"),
        "sink",
        str(srv.port),
        str(streams),
        str(tokens),
        str(seconds),
        api,
    ]
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=seconds + 30)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def measure_alone(
    streams: int, interval_ms: float, tokens: int, seconds: float, api: str, realtime: bool
) -> dict[str, Any]:
    """The server's own tick lateness under `streams` streams, its C client on the other core."""
    with TickServer(interval_us=int(interval_ms * 1000), tokens=tokens, realtime=realtime) as srv:
        got = sink(srv, streams, tokens, seconds, api)
        said = srv.stop()
        log = srv.log()
    return {
        "streams": streams,
        "interval_ms": interval_ms,
        "api": api,
        "realtime": srv.realtime,
        "responses": got["responses"],
        "tokens_per_s": round(len(log.tokens) / seconds),
        "offered_per_s": round(streams * 1000 / interval_ms),
        "deferred": log.deferred(),
        # Ticks at the full count only: the ramp-up ticks are easier.
        **log.tick_stats(min_streams=max(1, int(streams * 0.8))),
        "server_said": said,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description="The tick server alone, with its own C client.")
    ap.add_argument("--streams", type=int, nargs="+", default=[250])
    ap.add_argument("--interval-ms", type=float, nargs="+", default=[5.0])
    ap.add_argument("--tokens", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--api", default="anthropic", choices=["anthropic", "openai"])
    ap.add_argument("--no-realtime", action="store_true", help="no chrt -f 50 for the server")
    args = ap.parse_args()
    for n in args.streams:
        for ms in args.interval_ms:
            r = measure_alone(n, ms, args.tokens, args.seconds, args.api, not args.no_realtime)
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
