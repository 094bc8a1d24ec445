"""What holds the engine's event loop during an open-loop run: collections and flushes.

    .venv/bin/python benchmarks/loop_pauses.py --rate 10000 --runs 3

One zqbench process pinned to CPU 0 against the trivial loopback server of
benchmarks/loadgen.py on CPU 1, `constant-arrival-rate` at `--rate` for `--seconds`,
non-streamed. A `sitecustomize` module, put first on the run's PYTHONPATH, times from inside
the process (and changes nothing it measures): every garbage collection by generation
(`gc.callbacks`), every step of the sample recorder's stepped flush and its last step (the
batch written), and every progress snapshot, each within the load (from the heap's freeze,
just before the schedule starts, for the run's length). Per run it prints the lag p99, each
kind's count, total and largest pause, and the clumps of late sends (lag over 1 ms, a gap of
5 ms or more between two clumps): a pause that late sends follow is the one to remove.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.loadgen import TrivialServer, scenario_file, taskset  # noqa: E402

PROBE = textwrap.dedent(
    """
    import atexit, gc, json, os, time

    events, started, frozen = [], [0.0], [None]

    def _gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            events.append((started[0], time.perf_counter() - started[0],
                           "gc gen %d" % info["generation"]))

    gc.callbacks.append(_gc)
    _freeze = gc.freeze

    def _frozen():
        _freeze()
        frozen[0] = time.perf_counter()

    gc.freeze = _frozen

    import zqbench.engines.live as live
    import zqbench.samples.writer as writer

    _steps = writer.SampleRecorder.flush_steps

    def _timed_steps(self):
        steps = _steps(self)
        while True:
            t = time.perf_counter()
            try:
                next(steps)
            except StopIteration:
                events.append((t, time.perf_counter() - t, "flush: last step"))
                return
            events.append((t, time.perf_counter() - t, "flush: a column"))
            yield

    writer.SampleRecorder.flush_steps = _timed_steps
    _snapshot = live.LiveStats.snapshot

    def _timed_snapshot(self):
        t = time.perf_counter()
        try:
            return _snapshot(self)
        finally:
            events.append((t, time.perf_counter() - t, "progress snapshot"))

    live.LiveStats.snapshot = _timed_snapshot

    def _write():
        if frozen[0] is not None:
            with open(os.environ["ZQ_PAUSES_OUT"], "w") as f:
                json.dump([(t - frozen[0], d, k) for t, d, k in events if t >= frozen[0]], f)

    atexit.register(_write)
    """
)


def clumps(out: Path) -> list[tuple[float, float, int, float]]:
    """Runs of late sends (lag over 1 ms): (from s, to s, sends, the largest lag in ms)."""
    t = pq.read_table(out / "samples.parquet", columns=["t_intended", "t_send", "connection_wait"])
    t = t.drop_null()
    intended = t.column("t_intended").to_numpy()
    lag = (t.column("t_send").to_numpy() - intended - t.column("connection_wait").to_numpy()) / 1e6
    order = np.argsort(intended)
    intended, lag = intended[order] / 1e9, lag[order]
    late = np.flatnonzero(lag > 1.0)
    found: list[tuple[float, float, int, float]] = []
    start = 0
    for i in range(1, len(late) + 1):
        if i == len(late) or intended[late[i]] - intended[late[i - 1]] > 0.005:
            part = late[start:i]
            found.append((intended[part[0]], intended[part[-1]], len(part), float(lag[part].max())))
            start = i
    return found if len(late) else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=10000.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loop_pauses-") as tmp:
        where = Path(tmp)
        (where / "sitecustomize.py").write_text(PROBE)
        scenario = scenario_file(where, args.rate, args.seconds)
        with TrivialServer() as server:
            for i in range(args.runs):
                out, record = where / f"run{i}", where / f"pauses{i}.json"
                env = {**os.environ, "PYTHONPATH": f"{where}{os.pathsep}{REPO}",
                       "ZQ_PAUSES_OUT": str(record)}  # fmt: skip
                subprocess.run(
                    [*taskset(0), sys.executable, "-m", "zqbench", "run", str(scenario),
                     "--target", server.url, "--model", "fast", "--calibration", "off",
                     "--no-server-metrics", "--quiet", "--out", str(out)],
                    cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    check=False,
                )  # fmt: skip
                summary = json.loads((out / "summary.json").read_text())
                p99 = summary["metrics"]["schedule_lag"]["p99"] * 1e3
                print(f"run {i + 1}: {args.rate:g} req/s, schedule_lag p99 {p99:.2f} ms")
                kinds: dict[str, list[float]] = {}
                for t, d, kind in json.loads(record.read_text()):
                    if t <= args.seconds + 0.1:  # the load, not the analysis after it
                        kinds.setdefault(kind, []).append(d * 1e3)
                for kind, ms in sorted(kinds.items()):
                    p90 = np.percentile(ms, 90)
                    print(f"  {kind:18s} {len(ms):5d} pauses, {sum(ms):7.1f} ms in all, "
                          f"largest {max(ms):.2f} ms, p90 {p90:.2f} ms")  # fmt: skip
                found = clumps(out)
                late = sum(n for _, _, n, _ in found)
                print(f"  late sends (lag > 1 ms): {late} in {len(found)} clumps")
                for a, b, n, worst in sorted(found, key=lambda c: -c[2])[:5]:
                    print(f"    t = {a:.3f}-{b:.3f} s: {n} sends, lag up to {worst:.2f} ms")


if __name__ == "__main__":
    main()
