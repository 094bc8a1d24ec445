"""What distribution costs: native engine, 2 local Locust workers and `--workers 2`, side by side.

Reproduce (about 12 minutes on 2 cores; Markdown to stdout, JSON and Markdown to --json/--md):

    .venv/bin/python benchmarks/distributed.py \
        --json docs/benchmarks/distributed-2026-11-30.json \
        --md docs/benchmarks/distributed-2026-11-30.md

Against the trivial loopback server of benchmarks/loadgen.py (granian, 1 worker, pinned to
CPU 1), with every client process pinned to CPU 0, three configurations step the same
open-loop rates (HTTP/1.1, uniform arrivals, ~5 s each), in rounds that alternate their
order:

- `native`: one `zqbench run` process;
- `distributed`: `zqbench run --distributed --expect-workers 2` plus two
  `zqbench worker --once` processes on loopback (Locust's master/worker runners);
- `workers2`: `zqbench run --workers 2` (one process per share, on the same core).

For each run: achieved rate and `schedule_lag` p99 (t_send - t_intended, from the merged
samples.parquet); a rate is held when lag p99 < 1 ms and achieved/offered >= 0.97. A second
pass at `--cpu-rates` runs without the spin before each send (the hidden `--spin-us 0`: the
spin keeps a core busy whatever the rate) and gives the client CPU per request: user+system
time of all the configuration's processes (and their children), read from /proc every
~20 ms, over the load's window only (first intended send to last answer; start-up and
output writing excluded); for `distributed`, the master's and the workers' separately.

All clients share one core here, so adding processes cannot add throughput: what the run
measures is what distribution costs per request, as a ratio to the native engine in the
same round. Multi-machine capacity follows on paper from the per-process costs. The machine
is shared: the spread over rounds is reported with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.loadgen import (  # noqa: E402
    ZQBENCH,
    TrivialServer,
    free_port,
    pct,
    scenario_file,
    taskset,
)

CONFIGS = ("native", "distributed", "workers2")
LAG_LIMIT_MS = 1.0
MIN_RATIO = 0.97


@dataclass
class Proc:
    name: str  # "master", "worker0", ... or "run"
    popen: subprocess.Popen[bytes]
    code: int | None = None
    # (monotonic ns, CPU s of the process and its descendants so far), every ~20 ms
    timeline: list[tuple[int, float]] = field(default_factory=list)


TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process and its live descendants, from /proc (the
    `--workers 2` share processes included; reaped ones are in the parent's c-times)."""
    total = 0.0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
        stack.extend(int(c) for c in children)
    return total


def window_cpu_s(proc: Proc, t0_ns: int, t1_ns: int) -> float:
    """CPU spent between two instants: the last sample at or before t0 to the first at or
    after t1 (the poll interval widens the window by at most ~20 ms each side)."""
    before = [cpu for t, cpu in proc.timeline if t <= t0_ns] or [proc.timeline[0][1]]
    after = [cpu for t, cpu in proc.timeline if t >= t1_ns] or [proc.timeline[-1][1]]
    return after[0] - before[-1]


def start(name: str, args: list[str]) -> Proc:
    popen = subprocess.Popen(
        [*taskset(0), *ZQBENCH, *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), "ZQBENCH_SECRET": "benchmark-" + "0" * 32},
    )
    return Proc(name, popen)


def run_config(config: str, scenario: Path, target: str, out: Path, extra: list[str]) -> list[Proc]:
    """One run of one configuration; CPU seconds per process and the exit codes."""
    common = [
        "run",
        str(scenario),
        "--target",
        target,
        "--model",
        "bench",
        "--out",
        str(out),
        "--quiet",
        "--calibration",
        "off",
        "--slo",
        "errors:rate<1",
        *extra,
    ]
    procs: list[Proc]
    if config == "native":
        procs = [start("run", common)]
    elif config == "workers2":
        procs = [start("run", [*common, "--workers", "2"])]
    else:
        port = free_port()
        master = start(
            "master",
            [
                *common,
                "--distributed",
                "--expect-workers",
                "2",
                "--master-bind",
                f"127.0.0.1:{port}",
            ],
        )
        workers = [
            start(
                f"worker{i}",
                [
                    "worker",
                    "--master",
                    f"127.0.0.1:{port}",
                    "--once",
                    "--out",
                    str(out.parent / f"{out.name}-w"),
                ],
            )
            for i in range(2)
        ]
        procs = [master, *workers]
    return wait_all(procs, timeout_s=120)


def wait_all(procs: list[Proc], timeout_s: float) -> list[Proc]:
    """Wait for every process, sampling its CPU on the way; kill what overstays."""
    deadline = time.monotonic() + timeout_s
    while any(p.popen.poll() is None for p in procs):
        now = time.monotonic_ns()
        for proc in procs:
            if proc.popen.returncode is None:
                proc.timeline.append((now, tree_cpu_s(proc.popen.pid)))
                if time.monotonic() > deadline:
                    proc.popen.kill()
        time.sleep(0.02)
    for proc in procs:
        proc.code = proc.popen.returncode
        err = proc.popen.stderr.read() if proc.popen.stderr else b""
        if proc.popen.stderr:
            proc.popen.stderr.close()
        if proc.code not in (0, 1, 4) and err:  # 4: invalid, lag (in the table)
            text = err.decode(errors="replace").strip()[-300:]
            print(f"  {proc.name} (exit {proc.code}): {text}", file=sys.stderr)
    return procs


def measure(
    config: str, rate: float, seconds: float, target: str, tmp: Path, tag: str, *, spin: bool
) -> dict[str, Any]:
    out = tmp / f"out-{config}-{rate:g}-{tag}-{int(spin)}"
    extra = [] if spin else ["--spin-us", "0"]
    procs = run_config(config, scenario_file(tmp, rate, seconds), target, out, extra)
    row: dict[str, Any] = {"config": config, "rate": rate, "spin": spin}
    row.update({f"exit_{p.name}": p.code for p in procs})
    path = out / "samples.parquet"
    if not path.exists():
        return {**row, "sent": 0, "achieved": 0.0, "lag_p99_ms": None, "cpu_s": None}
    parquet = pq.read_table(path)
    table = parquet.to_pandas()
    # The load's window on the machine's monotonic clock (the harness's clock too): from
    # the first intended send to the last answer. Start-up and the writing of outputs fall
    # outside it, so no baseline needs subtracting.
    start = int(parquet.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    t0, t1 = start + int(table["t_intended"].min()), start + int(table["t_end"].max())
    for proc in procs:
        row[f"cpu_{proc.name}"] = window_cpu_s(proc, t0, t1)
    lag = (table["t_send"] - table["t_intended"]).to_numpy() / 1e6
    span = (table["t_send"].max() - table["t_send"].min()) / 1e9
    summary = json.loads((out / "summary.json").read_text())
    dist = summary.get("distributed") or {}
    row.update(
        sent=len(table),
        ok=int(table["error"].isna().sum()),
        achieved=(len(table) - 1) / span if span > 0 else 0.0,
        lag_p50_ms=pct(lag, 0.5),
        lag_p99_ms=pct(lag, 0.99),
        window_s=(t1 - t0) / 1e9,
        cpu_s=sum(row[f"cpu_{p.name}"] for p in procs),
        verdict=summary.get("verdict"),
        clock_uncertainty_us=[
            w["clock_uncertainty_ns"] / 1e3
            for w in dist.get("workers", [])
            if w.get("clock_uncertainty_ns") is not None
        ],
    )
    return row


def held(row: dict[str, Any]) -> bool:
    lag = row.get("lag_p99_ms")
    return lag is not None and lag < LAG_LIMIT_MS and row["achieved"] >= MIN_RATIO * row["rate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="500,1000,2000,3000,4000,5000")
    parser.add_argument("--cpu-rates", default="1000,3000", help="the CPU pass (no spin)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--render", type=Path, help="re-render a saved --json, run nothing")
    args = parser.parse_args()
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return
    configs = args.configs.split(",")
    results: dict[str, Any] = {
        "seconds": args.seconds,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "runs": [],
    }
    passes = [(float(r), True) for r in args.rates.split(",")]
    passes += [(float(r), False) for r in args.cpu_rates.split(",") if r]
    with tempfile.TemporaryDirectory() as d, TrivialServer() as srv:
        tmp = Path(d)
        for rnd in range(args.rounds):
            order = configs[rnd % len(configs) :] + configs[: rnd % len(configs)]
            for rate, spin in passes:
                for config in order:
                    row = measure(config, rate, args.seconds, srv.url, tmp, str(rnd), spin=spin)
                    results["runs"].append({**row, "round": rnd})
                    print(json.dumps(_brief(row)), file=sys.stderr)
    results["loadavg_after"] = os.getloadavg()
    text = render(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.md:
        args.md.write_text(text + "\n")


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("config", "rate", "spin", "sent", "achieved", "lag_p99_ms", "cpu_s")
    return {k: row.get(k) for k in keys}


def _spread(values: list[float], fmt: str = "{:.0f}") -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))} .. {fmt.format(max(values))})"


def _cost(row: dict[str, Any], key: str = "cpu_s") -> float | None:
    """CPU ms per request in the load's window (a process's own with `key`)."""
    if not row.get("sent") or row.get(key) is None:
        return None
    return float(row[key]) / row["sent"] * 1000


def _twin(results: dict[str, Any], row: dict[str, Any], config: str) -> dict[str, Any] | None:
    """The run of `config` in the same round, rate and pass as `row`."""
    keys = ("round", "rate", "spin")
    return next(
        (r for r in results["runs"] if r["config"] == config and all(r[k] == row[k] for k in keys)),
        None,
    )


def analyse(results: dict[str, Any]) -> dict[str, Any]:
    """Per configuration: the highest rate held in each round (spin on, as users run it);
    CPU ms per request from the pass without the spin, and its ratio to native's in the
    same round and at the same rate; for `distributed`, the master's and the workers'."""
    configs = sorted({r["config"] for r in results["runs"]}, key=CONFIGS.index)
    out: dict[str, Any] = {"held": {}, "cpu": {}, "ratio": {}, "master": [], "workers": []}
    for config in configs:
        out["held"][config] = [
            max(
                (r["rate"] for r in results["runs"]
                 if r["config"] == config and r["round"] == rnd and r["spin"] and held(r)),
                default=0.0,
            )
            for rnd in range(results["rounds"])
        ]  # fmt: skip
    for row in results["runs"]:
        cost = _cost(row)
        if row["spin"] or cost is None:
            continue
        out["cpu"].setdefault(row["config"], []).append(cost)
        native = _twin(results, row, "native")
        native_cost = None if native is None else _cost(native)
        if native_cost:
            out["ratio"].setdefault(row["config"], []).append(cost / native_cost)
        if row["config"] == "distributed":
            out["master"].append(_cost(row, "cpu_master") or 0.0)
            out["workers"].append(sum(_cost(row, f"cpu_worker{i}") or 0.0 for i in range(2)))
    return out


def _marginal(results: dict[str, Any]) -> list[str]:
    """CPU per second of load split in two, from the no-spin runs at two rates of the same
    round: a fixed part (ms of CPU per second: timers, pumps, heartbeats, per process) and
    a marginal part (ms per request): the slope between the rates."""
    runs = [r for r in results["runs"] if not r["spin"] and r.get("cpu_s") is not None]
    rates = sorted({r["rate"] for r in runs})
    if len(rates) < 2:
        return []
    lo, hi = rates[0], rates[-1]
    lines = [
        f"| config | marginal CPU ms / request ({lo:.0f} .. {hi:.0f} req/s) "
        "| fixed CPU ms / s of load |",
        "|---|---|---|",
    ]
    for config in sorted({r["config"] for r in runs}, key=CONFIGS.index):
        slopes, fixed = [], []
        for rnd in range(results["rounds"]):
            pair = [
                next((r for r in runs if r["config"] == config and r["round"] == rnd
                      and r["rate"] == rate), None)
                for rate in (lo, hi)
            ]  # fmt: skip
            if pair[0] is None or pair[1] is None:
                continue
            per_s = [r["cpu_s"] / r["window_s"] * 1000 for r in pair]  # ms of CPU per s
            slope = (per_s[1] - per_s[0]) / (hi - lo)
            slopes.append(slope)
            fixed.append(per_s[0] - slope * lo)
        lines.append(f"| {config} | {_spread(slopes, '{:.3f}')} | {_spread(fixed, '{:.0f}')} |")
    return lines


def _lag_table(results: dict[str, Any]) -> list[str]:
    """Lag p99 (ms) at each offered rate, spin on: median (min .. max) over rounds."""
    runs = [r for r in results["runs"] if r["spin"] and r.get("lag_p99_ms") is not None]
    configs = sorted({r["config"] for r in runs}, key=CONFIGS.index)
    lines = [
        "| offered req/s | " + " | ".join(f"{c}: lag p99 ms" for c in configs) + " |",
        "|---" * (len(configs) + 1) + "|",
    ]
    for rate in sorted({r["rate"] for r in runs}):
        cells = [
            _spread([r["lag_p99_ms"] for r in runs if r["config"] == c and r["rate"] == rate],
                    "{:.1f}")
            for c in configs
        ]  # fmt: skip
        lines.append(f"| {rate:.0f} | " + " | ".join(cells) + " |")
    return lines


def render(results: dict[str, Any]) -> str:
    a = analyse(results)
    load = results["loadavg_before"][0], results["loadavg_after"][0]
    lines = [
        f"{results['rounds']} rounds, {results['seconds']:g} s per run, {results['cpus']} CPUs,"
        f" load average {load[0]:.1f} before, {load[1]:.1f} after."
        " Median (min .. max) over rounds.",
        "",
        "| config | highest rate held, req/s | client CPU ms / request, no spin "
        "| CPU ratio to native, same round and rate |",
        "|---|---|---|---|",
    ]
    for config, best in a["held"].items():
        lines.append(
            f"| {config} | {_spread(best)} | {_spread(a['cpu'].get(config, []), '{:.3f}')} "
            f"| {_spread(a['ratio'].get(config, []), '{:.2f}')} |"
        )
    if a["master"]:
        lines += [
            "",
            f"distributed, by process (CPU ms / request, no spin): master"
            f" {_spread(a['master'], '{:.3f}')}, the two workers together"
            f" {_spread(a['workers'], '{:.3f}')}",
        ]
    lines += ["", *_marginal(results), "", *_lag_table(results)]
    lines += [
        "",
        "| config | spin | offered req/s | round | achieved req/s | lag p99 ms "
        "| CPU ms / request |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["runs"]:
        cost = _cost(row)
        lag = row.get("lag_p99_ms")
        lines.append(
            f"| {row['config']} | {'on' if row['spin'] else 'off'} | {row['rate']:.0f}"
            f" | {row['round']} | {row['achieved']:.0f} | {'-' if lag is None else f'{lag:.3f}'}"
            f" | {'-' if cost is None else f'{cost:.3f}'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
