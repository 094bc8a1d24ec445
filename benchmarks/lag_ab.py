"""The generator's lateness at a high open-loop rate: two commits side by side, A B A B.

    .venv/bin/python benchmarks/lag_ab.py --a 536feec --b HEAD --rate 10000 --pairs 5

Each commit is checked out into a temporary git worktree and run with this venv (the same
dependencies), against the trivial loopback server of benchmarks/loadgen.py pinned to CPU 1,
one zqbench process pinned to CPU 0, `constant-arrival-rate` at `--rate` for `--seconds`,
non-streamed, 16 prompt tokens. Each run's `schedule_lag` p99 comes from its summary.json;
the runs alternate (A B A B) because this machine's noise changes from minute to minute.
Prints each pair (lag p99, the process's CPU seconds, its sends a second mid-run), the ratio of
the lag medians (B over A), the CPU difference a request, and the ratio of the sends a second
(the capacity, at a rate past it: `--rate 20000`): run it before resolving an issue that
touches the engine's hot path (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.loadgen import TrivialServer, scenario_file, taskset  # noqa: E402


def checkout(rev: str, where: Path) -> Path:
    """`rev` in a detached worktree under `where` (removed by the caller's cleanup)."""
    path = where / rev.replace("/", "_")
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(path), rev],
                   cwd=REPO, check=True)  # fmt: skip
    return path


def one_run(
    tree: Path, scenario: Path, url: str, out: Path, seconds: float
) -> tuple[float | None, float, float | None]:
    """One run from `tree`: its schedule_lag p99 in ms (None if the run wrote no summary),
    the process's CPU seconds (user + system, start-up included: both commits send the same
    requests, so the difference is theirs), and its sends a second between t = 1 s and 1 s
    before the end: the generator's capacity when the rate is past it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(
        [*taskset(0), sys.executable, "-m", "zqbench", "run", str(scenario), "--target", url,
         "--model", "fast", "--calibration", "off", "--no-server-metrics", "--quiet",
         "--out", str(out)],
        cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, _, usage = os.wait4(proc.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    summary = out / "summary.json"
    if not summary.exists():
        return None, cpu, None
    p99 = json.loads(summary.read_text())["metrics"]["schedule_lag"].get("p99")
    sent = pq.read_table(out / "samples.parquet", columns=["t_send"]).column("t_send")
    t_send = sent.drop_null().to_numpy() / 1e9
    mid = int(((t_send > 1.0) & (t_send < seconds - 1.0)).sum()) / (seconds - 2.0)
    return (None if p99 is None else p99 * 1e3), cpu, mid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="the commit before (a git revision)")
    parser.add_argument("--b", default="HEAD", help="the commit after")
    parser.add_argument("--rate", type=float, default=10000.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lag_ab-") as tmp:
        where = Path(tmp)
        trees = {"A": checkout(args.a, where), "B": checkout(args.b, where)}
        try:
            scenario = scenario_file(where, args.rate, args.seconds)
            lags: dict[str, list[float]] = {"A": [], "B": []}
            cpus: dict[str, list[float]] = {"A": [], "B": []}
            rates: dict[str, list[float]] = {"A": [], "B": []}
            with TrivialServer() as server:
                for i in range(args.pairs):
                    pair = []
                    for name, tree in trees.items():
                        out = where / f"{name}{i}"
                        lag, cpu, rate = one_run(tree, scenario, server.url, out, args.seconds)
                        shown = "-" if lag is None else f"{lag:.2f}"
                        sends = "-" if rate is None else f"{rate:,.0f}"
                        pair.append(f"{name} {shown} ms ({cpu:.2f} s CPU, {sends} sends/s)")
                        cpus[name].append(cpu)
                        if rate is not None:
                            rates[name].append(rate)
                        if lag is not None:
                            lags[name].append(lag)
                    print(f"pair {i + 1}: " + ", ".join(pair), flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)],
                               cwd=REPO, check=False)  # fmt: skip
    med = {k: statistics.median(v) for k, v in lags.items() if v}
    shown = {k: f"{med[k]:.2f} ms" if k in med else "-" for k in ("A", "B")}
    print(f"{args.rate:g} req/s, schedule_lag p99 medians: A ({args.a}) {shown['A']}, "
          f"B ({args.b}) {shown['B']}")  # fmt: skip
    if "A" in med and "B" in med and med["A"] > 0:
        print(f"ratio B/A: {med['B'] / med['A']:.2f}")
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    sent = args.rate * args.seconds
    per_request_us = (cpu["B"] - cpu["A"]) / sent * 1e6
    print(f"CPU medians: A {cpu['A']:.2f} s, B {cpu['B']:.2f} s; "
          f"B - A = {per_request_us:+.1f} us a request ({sent:g} requests)")  # fmt: skip
    if rates["A"] and rates["B"]:
        a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
        print(f"sends/s medians mid-run (the capacity, when the rate is past it): "
              f"A {a:,.0f}, B {b:,.0f}; ratio B/A {b / a:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
