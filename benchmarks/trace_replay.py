"""Trace replay: its schedule lag against the arrival-rate executor's, and a huge trace's memory.

    .venv/bin/python benchmarks/trace_replay.py [--rate 1000] [--seconds 20] [--pairs 2]
        [--big-rows 10000000] [--big-seconds 60] [--json docs/benchmarks/trace-replay.json]

Against the trivial loopback server of `benchmarks/loadgen.py` (pinned to CPU 1, zqbench
to CPU 0):

1. **lag**: a generated mooncake trace at `--rate` req/s (timestamps to the microsecond,
   16-token blocks, 16-64 token prompts) against `constant-arrival-rate` at the same rate
   with 16-token prompts, evenly spaced and Poisson, in alternating runs (trace,
   arrival-rate, trace, ...). Each run's schedule lag (t_send - t_intended) p50/p99 from
   its samples, achieved rate, and zqbench's CPU seconds per 1000 requests.
2. **memory**: a `--big-rows`-line trace (`scenarios/data/make_trace.py`, 512-token blocks,
   at `--rate`) replayed from its start; the run is stopped with SIGINT after
   `--big-seconds` of load (it keeps its partial results, exit 130). Peak RSS of each
   zqbench process and of all of them together, sampled every 0.2 s from /proc, and the
   time from start to the first request (the index pass and the plan).

What grows with a trace's length is its index (8 bytes a row) and each worker's schedule
(8 bytes a row); samples grow with requests sent, as in any run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.loadgen import ZQBENCH, TrivialServer, pct, run_zqbench, taskset  # noqa: E402

MAKE_TRACE = REPO / "scenarios/data/make_trace.py"


def make_trace(
    out: Path, rows: int, rate: float, block_tokens: int, max_blocks: int, arrivals: str
) -> None:
    args = ["--rows", str(rows), "--rate", str(rate), "--block-tokens", str(block_tokens)]
    args += ["--max-blocks", str(max_blocks), "--decimals", "3", "--arrivals", arrivals]
    args += ["--out", str(out)]
    subprocess.run([sys.executable, str(MAKE_TRACE), *args], check=True)


def trace_scenario(folder: Path, trace: Path, block_tokens: int) -> Path:
    path = folder / f"{trace.stem}.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "{trace.stem}"
            api = "anthropic"
            [load]
            executor = "trace"
            trace = "{trace}"
            block_tokens = {block_tokens}
            [request]
            stream = false
            timeout = "10s"
            """
        )
    )
    return path


def rate_scenario(folder: Path, rate: float, seconds: float, arrivals: str) -> Path:
    path = folder / f"arrivals-{arrivals}.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "arrivals"
            api = "anthropic"
            [load]
            executor = "constant-arrival-rate"
            rate = {rate}
            duration = "{seconds}s"
            arrivals = "{arrivals}"
            [request]
            max_tokens = 1
            stream = false
            timeout = "10s"
            prompt_tokens = 16
            """
        )
    )
    return path


def measure(scenario: Path, target: str, out: Path) -> dict[str, Any]:
    args = [str(scenario), "--target", target, "--model", "bench", "--slo", "errors:rate<1"]
    cpu, code = run_zqbench(args, out)
    table = pq.read_table(out / "samples.parquet").to_pandas()
    lag = (table["t_send"] - table["t_intended"]).to_numpy() / 1e6
    span = (table["t_send"].max() - table["t_send"].min()) / 1e9
    return {
        "sent": len(table),
        "ok": int(table["error"].isna().sum()),
        "achieved": (len(table) - 1) / span if span > 0 else 0.0,
        "lag_p50_ms": pct(lag, 0.5),
        "lag_p99_ms": pct(lag, 0.99),
        "cpu_s_per_1000": 1000 * cpu / max(1, len(table)),
        "exit": code,
    }


def _tree(root: int) -> list[int]:
    """`root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def big_replay(scenario: Path, target: str, out: Path, seconds: float) -> dict[str, Any]:
    cmd = [*taskset(0), *ZQBENCH, "run", str(scenario), "--target", target, "--model", "bench"]
    cmd += ["--out", str(out), "--quiet", "--calibration", "off", "--slo", "errors:rate<1"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict[int, float] = {}
    peak_total, first_request_s, stopped = 0.0, None, False
    while proc.poll() is None:
        pids = _tree(proc.pid)
        rss = {pid: _rss_mib(pid) for pid in pids}
        for pid, value in rss.items():
            peaks[pid] = max(peaks.get(pid, 0.0), value)
        peak_total = max(peak_total, sum(rss.values()))
        if first_request_s is None and (out / "run-start.json").exists():
            first_request_s = time.monotonic() - start
        due = first_request_s is not None and time.monotonic() - start > first_request_s + seconds
        if due and not stopped:
            proc.send_signal(signal.SIGINT)
            stopped = True
        time.sleep(0.2)
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    table = pq.read_table(out / "samples.parquet")
    return {
        "exit": proc.returncode,
        "start_to_first_request_s": first_request_s,
        "wall_s": time.monotonic() - start,
        "sent": table.num_rows,
        "peak_rss_mib_per_process": sorted((round(v, 1) for v in peaks.values()), reverse=True),
        "peak_rss_mib_total": round(peak_total, 1),
        "stderr_tail": err[-300:],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--big-rows", type=int, default=10_000_000)
    p.add_argument("--big-seconds", type=float, default=60.0)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    results: dict[str, Any] = {"rate": a.rate, "seconds": a.seconds, "lag": [], "big": None}
    with tempfile.TemporaryDirectory() as tmp_name, TrivialServer() as server:
        tmp = Path(tmp_name)
        runs = {}
        for arrivals in ("uniform", "poisson"):
            trace = tmp / f"lag-{arrivals}.jsonl"
            make_trace(trace, round(a.rate * a.seconds), a.rate, 16, 4, arrivals)
            runs[("trace", arrivals)] = trace_scenario(tmp, trace, 16)
            runs[("arrival-rate", arrivals)] = rate_scenario(tmp, a.rate, a.seconds, arrivals)
        for i in range(a.pairs):
            for (name, arrivals), scenario in runs.items():
                measured = measure(scenario, server.url, tmp / f"{name}-{arrivals}{i}")
                row = {"executor": name, "arrivals": arrivals, "run": i, **measured}
                results["lag"].append(row)
                print(json.dumps(row), flush=True)
        if a.big_rows:
            big = tmp / "big.jsonl"
            t0 = time.monotonic()
            make_trace(big, a.big_rows, a.rate, 512, 6, "poisson")
            results["big"] = {
                "rows": a.big_rows,
                "file_mib": round(big.stat().st_size / 2**20, 1),
                "generate_s": round(time.monotonic() - t0, 1),
                **big_replay(trace_scenario(tmp, big, 512), server.url, tmp / "big", a.big_seconds),
            }
            print(json.dumps(results["big"]), flush=True)
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
