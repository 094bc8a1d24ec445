"""Large responses do not starve the dispatcher: `schedule_lag` while 10% of responses are ~20 MB.

Reproduce (about 2 minutes with the defaults; Markdown to stdout, JSON to --json):

    .venv/bin/python benchmarks/large_responses.py [--rate 30] [--seconds 15] [--repeat 3]

The target is granian (1 worker, 1 runtime thread, pinned to CPU 1 where `taskset` exists)
serving the OpenAI chat-completions app below. Every `--big-every`-th chat request (the
server's own count) gets a ~`--big-mb` MB answer, the rest a small one:

    control  streamed, and no big answers at all: the machine's own noise floor
    stream   big answers as SSE chat chunks of `--chunk-chars` characters of content each
             (about 18,000 events for 20 MB at 1000 characters), then a usage chunk and
             `data: [DONE]`, written in 64 KiB pieces as fast as the socket takes them
    body     big answers as one JSON body, `choices[0].message.content` holding the 20 MB

zqbench runs each variant open loop (`--rate` req/s, uniform arrivals, `--seconds` long)
through the library (`zqbench.pipeline.run.run_scenario`, one worker) in a child process pinned to
CPU 0. Reported per run, from its samples.parquet: `schedule_lag` (t_send - t_intended) p50,
p99 and max, the big answers that succeeded, the error classes; from the child: how long
our own code held the event loop (`LoopStalls`: CPU time between two ticks of a 1 ms
ticker, which no other job on the machine can inflate), its CPU seconds, how much its
resident memory grew during the run (sampled every 5 ms from /proc/self/statm, after the
imports) and its peak RSS; and the machine's CPU pressure (/proc/pressure/cpu, "some"
avg10) at the end of the run, since other jobs on a shared machine set the noise floor.
Run it on two commits (before and after a change), alternating, on the same machine to
compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# --------------------------------------------------------------------------- the server
BIG_BYTES = int(float(os.environ.get("ZQ_BIG_MB", "20")) * 1_000_000)
CHUNK_CHARS = int(os.environ.get("ZQ_CHUNK_CHARS", "1000"))
BIG_EVERY = int(os.environ.get("ZQ_BIG_EVERY", "10"))
PIECE = 64 * 1024
HEADERS_JSON = [("content-type", "application/json")]
HEADERS_SSE = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


def _chunk(content: str, finish: str | None = None) -> bytes:
    obj = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "model": "bench",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _stream(n_events: int, chars: int) -> list[bytes]:
    """An SSE chat stream of `n_events` content chunks, in pieces of about 64 KiB holding
    whole events."""
    event = _chunk("x" * chars)
    usage = {"prompt_tokens": 16, "completion_tokens": n_events}
    tail = (
        _chunk("", "length")
        + b"data: "
        + json.dumps({"id": "chatcmpl-bench", "choices": [], "usage": usage}).encode()
        + b"\n\ndata: [DONE]\n\n"
    )
    per_piece = max(1, PIECE // len(event))
    pieces = [event * per_piece] * (n_events // per_piece)
    return [*pieces, event * (n_events % per_piece) + tail]


def _body(chars: int) -> bytes:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "x" * chars},
        "finish_reason": "length",
    }
    obj = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [choice],
        "usage": {"prompt_tokens": 16, "completion_tokens": max(1, chars // 4)},
    }
    return json.dumps(obj, separators=(",", ":")).encode()


_count = 0
if __name__ != "__main__":  # in the server only: the client must not hold them
    BIG_STREAM = _stream(max(1, BIG_BYTES // len(_chunk("x" * CHUNK_CHARS))), CHUNK_CHARS)
    SMALL_STREAM = _stream(8, 4)
    BIG_BODY = _body(BIG_BYTES)
    SMALL_BODY = _body(32)


async def app(scope: Any, proto: Any) -> None:
    """RSGI: every BIG_EVERY-th chat request is big (none with `x-big: no`); `"stream":true`
    in the request streams the answer."""
    global _count
    if scope.proto != "http":
        return
    body = await proto()
    if scope.method != "POST":
        proto.response_bytes(200, HEADERS_JSON, b"{}")
        return
    _count += 1
    big = _count % BIG_EVERY == 0 and scope.headers.get("x-big") != "no"
    if b'"stream":true' not in body:
        proto.response_bytes(200, HEADERS_JSON, BIG_BODY if big else SMALL_BODY)
        return
    transport = proto.response_stream(200, HEADERS_SSE)
    for piece in BIG_STREAM if big else SMALL_STREAM:
        await transport.send_bytes(piece)


# --------------------------------------------------------------------------- the client
def pinned(cpu: int, nice: int) -> list[str]:
    from benchmarks.loadgen import taskset

    return (["nice", "-n", str(nice)] if nice else []) + taskset(cpu)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    granian = Path(sys.executable).with_name("granian")
    cmd = [
        *pinned(1, args.nice), str(granian), "--interface", "rsgi", "--workers", "1",
        "--runtime-threads", "1", "--http", "1", "--no-access-log", "--host", "127.0.0.1",
        "--port", str(port), "--log-level", "warning", "benchmarks.large_responses:app",
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ZQ_BIG_MB": str(args.big_mb),
        "ZQ_CHUNK_CHARS": str(args.chunk_chars),
        "ZQ_BIG_EVERY": str(args.big_every),
    }
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("granian did not start")


def scenario(folder: Path, rate: float, seconds: float, stream: bool) -> Path:
    path = folder / f"large-{'stream' if stream else 'body'}.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "large-responses"
            description = "benchmark: 10% of responses are ~20 MB"
            api = "openai"
            [load]
            executor = "constant-arrival-rate"
            rate = {rate}
            duration = "{seconds}s"
            arrivals = "uniform"
            [request]
            max_tokens = 16
            stream = {"true" if stream else "false"}
            timeout = "60s"
            prompt_tokens = 16
            """
        )
    )
    return path


class RssSampler:
    """The largest resident set seen, sampled every 5 ms by a thread (Linux /proc)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self.page

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.now())

    def stop(self) -> float:
        """Growth over the start, MB."""
        self._stop.set()
        self._thread.join()
        return (self.peak - self.start) / 1e6


class LoopStalls:
    """CPU the worker's thread spends between two ticks of a 1 ms ticker on its event loop.

    `schedule_lag` also counts the time the OS gives the CPU to other jobs, which on a busy
    shared machine is most of it; this counts only the time our own code held the loop, so
    a parse that blocks the dispatcher shows however noisy the machine. The ticker is
    started by wrapping `NativeWorker.run` (the same on every commit measured)."""

    def __init__(self) -> None:
        self.cpu_ms: list[float] = []

    def install(self) -> None:
        import asyncio

        from zqbench.engines import native

        run = native.NativeWorker.run
        stalls = self

        async def ticker() -> None:
            last = time.thread_time_ns()
            while True:
                await asyncio.sleep(0.001)
                now = time.thread_time_ns()
                stalls.cpu_ms.append((now - last) / 1e6)
                last = now

        async def wrapped(worker: Any, work: Any) -> Any:
            task = asyncio.get_running_loop().create_task(ticker())
            try:
                return await run(worker, work)
            finally:
                task.cancel()

        native.NativeWorker.run = wrapped  # type: ignore[method-assign]

    def figures(self) -> dict[str, float]:
        ordered = sorted(self.cpu_ms) or [0.0]
        return {
            "stall_cpu_p999_ms": ordered[int(0.999 * (len(ordered) - 1))],
            "stall_cpu_max_ms": ordered[-1],
        }


def child(url: str, scenario_path: str, out: str, big: str) -> None:
    """One zqbench run in this process; prints its figures as one JSON line."""
    import numpy as np
    import pyarrow.parquet as pq

    from zqbench.pipeline.run import RunOptions, run_scenario

    stalls = LoopStalls()
    stalls.install()
    rss = RssSampler()
    cpu0 = time.process_time()
    result = run_scenario(
        RunOptions.of(
            scenario=scenario_path,
            target=url,
            model="bench",
            out=Path(out),
            calibration="off",  # type: ignore[arg-type]
            slos=("errors:rate<1",),
            headers=(f"x-big: {big}",),
            html=False,
        )
    )
    cpu = time.process_time() - cpu0
    growth = rss.stop()
    table = pq.read_table(Path(out) / "samples.parquet").to_pandas()
    lag = np.sort((table["t_send"] - table["t_intended"]).to_numpy() / 1e6)
    large = table[table["bytes_in"] > 1_000_000]

    def pct(q: float) -> float:
        return float(lag[max(0, int(np.ceil(q * len(lag))) - 1)])

    figures = {
        "sent": len(table),
        "big": len(large),
        "big_ok": int(large["error"].isna().sum()),
        "errors": table["error"].fillna("ok").value_counts().to_dict(),
        "lag_p50_ms": pct(0.5),
        "lag_p99_ms": pct(0.99),
        "lag_max_ms": float(lag[-1]),
        "verdict": result.summary.verdict,
        "cpu_s": cpu,
        "rss_growth_mb": growth,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **stalls.figures(),
    }
    print(json.dumps(figures))


def cpu_pressure() -> str:
    try:
        return Path("/proc/pressure/cpu").read_text().split()[1].split("=")[1]
    except (OSError, IndexError):
        return "n/a"


def measure(url: str, args: argparse.Namespace, variant: str, tmp: Path, i: int) -> dict[str, Any]:
    """One run of a variant: stream, body, or control (streamed, no big answers)."""
    path = scenario(tmp, args.rate, args.seconds, variant != "body")
    out = tmp / f"out-{variant}-{i}"
    big = "no" if variant == "control" else "yes"
    cmd = [
        *pinned(0, args.nice),
        sys.executable,
        __file__,
        "--child",
        url,
        str(path),
        str(out),
        big,
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"zqbench run failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["variant"] = variant
    figures["cpu_pressure_avg10"] = cpu_pressure()
    return figures


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | sent | big ok / big | errors | lag p50 ms | lag p99 ms | lag max ms "
        "| loop stall CPU p99.9 / max ms | client CPU s | RSS growth MB | peak RSS MB "
        "| verdict | CPU pressure |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        errs = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items()) if k != "ok") or "-"
        lines.append(
            f"| {r['variant']} | {r['sent']} | {r['big_ok']} / {r['big']} | {errs} | "
            f"{r['lag_p50_ms']:.3f} | {r['lag_p99_ms']:.3f} | {r['lag_max_ms']:.2f} | "
            f"{r['stall_cpu_p999_ms']:.2f} / {r['stall_cpu_max_ms']:.2f} | {r['cpu_s']:.2f} | "
            f"{r['rss_growth_mb']:.0f} | {r['peak_rss_mb']:.0f} | "
            f"{r['verdict']} | {r['cpu_pressure_avg10']}% |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant")
    ap.add_argument("--big-mb", type=float, default=20.0)
    ap.add_argument("--big-every", type=int, default=10)
    ap.add_argument("--chunk-chars", type=int, default=1000)
    ap.add_argument("--variants", default="control,stream,body")
    ap.add_argument("--nice", type=int, default=0, help="niceness of server and client")
    ap.add_argument("--keep", type=Path, help="keep the runs' folders here")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    proc, url = start_server(args)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="zq-large-") as tmp:
            folder = Path(tmp) if args.keep is None else args.keep
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(args.repeat):
                for variant in args.variants.split(","):
                    rows.append(measure(url, args, variant, folder, i))
                    print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)
    print(
        f"commit {commit or '?'}: {args.rate:g} req/s for {args.seconds:g} s, every "
        f"{args.big_every}th answer {args.big_mb:g} MB ({args.chunk_chars} characters a chunk)\n"
    )
    print(table(rows))
    if args.json:
        meta = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"commit": commit, "args": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
