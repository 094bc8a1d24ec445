"""Accuracy at 200 req/s, one commit against another in alternating runs (A B A B ...).

The same ruler judges both: this tree's programmed server (tests/servers) and its
request-by-request comparison (tests/core/accuracy.py). Only the zqbench under test changes:
each run is `python -m zqbench run` from a checkout (a `git worktree`), pinned to CPU 0 with
the server on CPU 1. Per run it prints the per-request p50 and p99 error of TTFB, TTFT and
latency (client interval minus the server's, ms) and the schedule lag p99 of summary.json.

    git worktree add -f /tmp/wta OLD --detach; git worktree add -f /tmp/wtb HEAD --detach
    .venv/bin/python benchmarks/accuracy_ab.py /tmp/wta /tmp/wtb --rounds 4 --json ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.core.accuracy import OPEN_LOOP, PROGRAM, compare_with_truth, p99
from tests.servers import ProgrammedServer

STALL_MS = 10.0
TICK_MS = 1e3 / os.sysconf("SC_CLK_TCK")


def _busy_ms() -> float:
    """CPU time spent on cores 0 and 1 since boot: user, nice, system, irq, softirq, steal."""
    total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name in ("cpu0", "cpu1"):
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, ticks[:8])
            total += user + nice + system + irq + softirq + steal
    return total * TICK_MS


def _process_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS  # utime, stime


def _children_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def one_run(checkout: Path, server: ProgrammedServer, out: Path, rate: float, seconds: float):
    out.mkdir(parents=True)
    scenario = out / "accuracy.toml"
    scenario.write_text(OPEN_LOOP.format(rate=rate, duration=f"{seconds}s"))
    server.reset()
    cmd = ["taskset", "-c", "0", sys.executable, "-m", "zqbench", "run", str(scenario),
           "--target", server.url, "--model", "m", "-H", PROGRAM, "--out", str(out / "run"),
           "--calibration", "off", "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    assert server.proc is not None
    before = _busy_ms(), _children_ms(), _process_ms(server.proc.pid)
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    after = _busy_ms(), _children_ms(), _process_ms(server.proc.pid)
    # 4 is INVALID: the run's own schedule lag judged it; its errors are still a measurement.
    if done.returncode not in (0, 1, 4):
        raise SystemExit(f"{checkout}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    errors, requests, failed, early = compare_with_truth(out / "run" / "samples.parquet", server)
    summary = json.loads((out / "run" / "summary.json").read_text())
    lag = summary["metrics"]["schedule_lag"]["p99"]
    return {
        "requests": requests,
        "failed": failed,
        "early": early,
        **{
            f"{k}_p50_ms": round(statistics.median(errors[k]), 3)
            for k in ("ttfb", "ttft", "latency")
        },
        **{f"{k}_p99_ms": round(p99(errors[k]), 3) for k in ("ttfb", "ttft", "latency")},
        "schedule_lag_p99_ms": round(lag * 1e3, 3) if lag is not None else None,
        # Requests that spent more than STALL_MS between the client and the server's stamps:
        # a descheduled process on either side (another load on a core, the hypervisor).
        "stalled": sum(
            max(parts) > STALL_MS
            for parts in zip(
                errors["send"], errors["head_delivery"], errors["token_delivery"], strict=True
            )
        ),
        # CPU that anything but this zqbench and the server took on their two cores during
        # the run (kernel network work included: a few hundred ms on a quiet machine). More
        # means another load shared a core, and the run's errors carry its time slices.
        "others_cpu_ms": round(
            (after[0] - before[0]) - sum(a - b for a, b in zip(after[1:], before[1:], strict=True))
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="checkout A (the older commit)")
    parser.add_argument("b", type=Path, help="checkout B")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=3)
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args()
    results: list[dict] = []
    with ProgrammedServer() as server, tempfile.TemporaryDirectory() as tmp:
        assert server.proc is not None
        os.sched_setaffinity(server.proc.pid, {1})  # zqbench runs on CPU 0
        for i in range(args.rounds):
            for label, checkout in (("A", args.a), ("B", args.b)):
                r = one_run(checkout, server, Path(tmp) / f"{i}{label}", args.rate, args.seconds)
                r.update(round=i, side=label, checkout=str(checkout))
                results.append(r)
                print(
                    f"round {i} {label}: ttft error p50 {r['ttft_p50_ms']:.3f} p99 "
                    f"{r['ttft_p99_ms']:.3f} ms, ttfb p99 {r['ttfb_p99_ms']:.3f}, latency p99 "
                    f"{r['latency_p99_ms']:.3f}; lag p99 {r['schedule_lag_p99_ms']} ms; "
                    f"{r['failed']} failed, {r['stalled']} stalled of {r['requests']}; "
                    f"others' CPU {r['others_cpu_ms']} ms",
                    flush=True,
                )
    for label in "AB":
        mine = [r for r in results if r["side"] == label]
        p99s = [r["ttft_p99_ms"] for r in mine]
        print(f"{label}: ttft p99 error median {statistics.median(p99s):.3f} ms, "
              f"range {min(p99s):.3f}-{max(p99s):.3f}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
