"""zqbench and vLLM's own `vllm bench serve`, side by side on one real vLLM server.

Reproduce (about 10 minutes on 2 cores; needs tests/vllm/setup.sh first):

    .venv/bin/python benchmarks/vllm_compare.py --out docs/benchmarks/vllm-compare-2026-11-30

(the defaults: --rates 4,12 --rounds 3 --requests 120 --prompt-tokens 128 --max-tokens 64).

One vLLM (CPU build, tiny random Llama, tests/vllm/serve.sh: pinned to core 0, 8 sequences
at a time) serves both clients, each pinned to core 1. For every rate, the same open-loop
load runs with each tool in turn, A B A B over `--rounds`, so that drift on a shared machine
falls on both: OpenAI chat completions, streamed, Poisson arrivals at the rate, `--requests`
requests, prompts of about `--prompt-tokens` tokens, `--max-tokens` output tokens.

- vllm bench serve: `--backend openai-chat --dataset-name random --random-input-len P
  --random-output-len M --request-rate R --num-prompts N`, through tests/vllm/vllm_cli.py;
- zqbench: a constant-arrival-rate scenario (arrivals "poisson", prompt_tokens P calibrated
  against the target, max_tokens M), `zqbench run FILE --api openai`, its rate and duration
  set so that it sends exactly N requests, the N-th at N/R, as vllm bench does
  (same_load_scenario).

Per tool and round: requests sent and completed, the arrival rate achieved, throughput,
TTFT p50/p99 as the tool reports it and as nearest-rank order statistics of its raw
per-request values (one estimator for both), TPOT p50, the mean prompt and output tokens
from the server's usage, and the server's own counters (/metrics) over the run. The report
is JSON plus a Markdown table with zqbench/vllm ratios (docs/benchmarks/vllm-compare-DATE).
Every process started here is stopped by its process group; all traffic is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.vllm.target import HERE as VLLM_DIR  # noqa: E402
from tests.vllm.target import (  # noqa: E402
    VllmServer,
    free_port,
    model_dir,
    start_vllm,
    venv_dir,
    vllm_available,
)
from zqbench.load.arrival_schedule import arrival_times  # noqa: E402
from zqbench.scenario import load_scenario  # noqa: E402

CLIENT_CPU = 1  # serve.sh pins vLLM to core 0
TOOLS = ("zqbench", "vllm")
# The server's counters read before and after each run (vllm:<name>).
COUNTERS = (
    "prompt_tokens_total",
    "generation_tokens_total",
    "prefix_cache_hits_total",
    "request_success_total",
    "request_queue_time_seconds_sum",
    "request_queue_time_seconds_count",
    "time_to_first_token_seconds_sum",
    "time_to_first_token_seconds_count",
)
GAUGES = ("num_requests_running", "num_requests_waiting")


@dataclass(frozen=True, slots=True)
class Load:
    rate: float
    requests: int
    prompt_tokens: int
    max_tokens: int
    seed: int


@dataclass(slots=True)
class Result:
    """One tool's run at one rate and round; times in milliseconds."""

    tool: str
    rate: float
    round: int
    seed: int
    sent: int
    completed: int
    sent_rate: float | None  # (sent - 1) / (last send - first send)
    throughput: float | None  # completed / (last end - first send)
    ttft_p50_ms: float | None  # as the tool reports it
    ttft_p99_ms: float | None
    ttft_p50_nr_ms: float | None  # nearest rank of the raw per-request values
    ttft_p99_nr_ms: float | None
    ttft_mean_ms: float | None  # of the raw values, to set beside vLLM's own mean
    tpot_p50_ms: float | None
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    wall_s: float
    exit_code: int
    # zqbench only: its own lateness against the schedule, and why it called a run invalid.
    schedule_lag_p99_ms: float | None = None
    invalid: list[str] = field(default_factory=list)
    # Requests the tool sent besides the load (zqbench: its target check, one token, not
    # streamed), with their client-side times: vLLM's counters include them.
    side_requests_ms: list[float] = field(default_factory=list)
    # Set by measure(): the server's counter deltas over the run, vLLM's own mean TTFT and
    # queue time from them, the client's TTFT minus the server's (means), and the machine's
    # load average as the run started (the machine is shared).
    server: dict[str, float] = field(default_factory=dict)
    server_ttft_mean_ms: float | None = None
    server_queue_mean_ms: float | None = None
    client_extra_ms: float | None = None
    loadavg_1m: float = 0.0


def taskset(cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)]
    return []


def nearest_rank(values: np.ndarray, q: float) -> float | None:
    if len(values) == 0:
        return None
    ordered = np.sort(values)
    return float(ordered[max(1, int(np.ceil(q * len(ordered)))) - 1])


def ms(seconds: Any) -> float | None:
    return None if seconds is None else float(seconds) * 1000.0


def mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def scrape(server: VllmServer) -> dict[str, float]:
    """vLLM's own counters and queue gauges from /metrics (summed over label sets)."""
    with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = dict.fromkeys((*COUNTERS, *GAUGES), 0.0)
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0].removeprefix("vllm:")
        if name in found:
            found[name] += float(line.rsplit(" ", 1)[1])
    return found


def wait_idle(server: VllmServer, bound_s: float = 120.0) -> None:
    """Until vLLM runs and queues nothing, so that no run starts behind the last one's tail."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        gauges = scrape(server)
        if gauges["num_requests_running"] == 0 and gauges["num_requests_waiting"] == 0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"vLLM still busy {bound_s:.0f} s after a run")


def warm_up(server: VllmServer, load: Load, work: Path, requests: int = 4) -> None:
    """Complete requests before any round, so that neither tool's first round meets a cold
    server; then a short zqbench run, whose calibration of the prompt size (cached for this
    URL) keeps its probes out of the measured rounds and vLLM's counters for them."""
    body = json.dumps(
        {
            "model": server.model,
            "messages": [{"role": "user", "content": "warm up " * 60}],
            "max_tokens": load.max_tokens,
        }
    ).encode()
    for _ in range(requests):
        req = urllib.request.Request(
            f"{server.base_url}/v1/chat/completions",
            data=body,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
    scenario = scenario_file(work / "zq-warm-up.toml", load, 1.0, 2.0)
    log = work / "zq-warm-up.log"
    cmd = zqbench(scenario, server, 0, work / "zq-warm-up", work)
    code, _ = run_logged(cmd, log, zqbench_env(work))
    if not (work / "zq-warm-up" / "summary.json").exists():
        raise RuntimeError(f"zqbench's warm-up exited {code}:\n{log_tail(log)}")


def scenario_file(path: Path, load: Load, rate: float, duration_s: float) -> Path:
    path.write_text(
        textwrap.dedent(
            f"""
            name = "vllm-compare-{load.rate:g}"
            description = "the load of benchmarks/vllm_compare.py"
            api = "openai"
            [load]
            executor = "constant-arrival-rate"
            rate = {rate!r}
            duration = "{duration_s:.6f}s"
            arrivals = "poisson"
            graceful_stop = "300s"
            [request]
            max_tokens = {load.max_tokens}
            stream = true
            timeout = "300s"
            prompt_tokens = {load.prompt_tokens}
            """
        )
    )
    return path


def same_load_scenario(folder: Path, load: Load) -> Path:
    """zqbench's scenario for vllm bench's load: N Poisson arrivals, the N-th at N / rate.

    vllm bench draws N exponential gaps and rescales their sum to N / rate ("to stabilise
    the throughput across seeds"); zqbench's Poisson process runs for a duration instead, so
    its count and realised rate vary (sd about sqrt(N)). From zqbench's own unit-rate points
    for this seed (y_i, independent of the rate), the scenario's rate is y_N * rate / N, which
    puts the N-th send at N / rate, and its duration ends between the N-th and (N+1)-th.
    """
    path = folder / f"zq-{load.rate:g}-seed{load.seed}.toml"
    n = load.requests
    long_s = 3.0 * n + 60.0
    unit = load_scenario(str(scenario_file(path, load, 1.0, long_s))).load
    y = arrival_times(unit, load.seed).times_ns / 1e9  # Λ-points at 1 req/s
    if len(y) <= n:
        raise RuntimeError(f"seed {load.seed}: fewer than {n} arrivals in {long_s} s")
    rate = float(y[n - 1]) * load.rate / n
    scenario_file(path, load, rate, (y[n - 1] + y[n]) / 2 / rate)
    check = arrival_times(load_scenario(str(path)).load, load.seed).times_ns
    if len(check) != n or abs(check[-1] / 1e9 - n / load.rate) > 1e-3:
        raise RuntimeError(f"seed {load.seed}: the schedule does not end at the {n}th request")
    return path


def run_logged(cmd: list[str], log: Path, env: dict[str, str]) -> tuple[int, float]:
    t0 = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc.returncode, time.monotonic() - t0


def log_tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def zqbench(scenario: Path, server: VllmServer, seed: int, out: Path, work: Path) -> list[str]:
    return [
        *taskset(CLIENT_CPU),
        sys.executable,
        "-m",
        "zqbench",
        "run",
        str(scenario),
        "--target",
        server.base_url,
        "--api",
        "openai",
        "--model",
        server.model,
        "--seed",
        str(seed),
        "--no-server-metrics",  # vllm bench does not scrape either
        "-q",
        "--out",
        str(out),
    ]


def zqbench_env(work: Path) -> dict[str, str]:
    # The calibration (cached per target URL) lives with the run, not in the user's cache.
    return {**os.environ, "PYTHONPATH": str(REPO), "ZQBENCH_CALIBRATION": str(work / "cal.json")}


def run_zqbench(server: VllmServer, load: Load, rnd: int, work: Path) -> Result:
    out = work / f"zq-{load.rate:g}-{rnd}"
    cmd = zqbench(same_load_scenario(work, load), server, load.seed, out, work)
    log = work / f"zq-{load.rate:g}-{rnd}.log"
    code, wall = run_logged(cmd, log, zqbench_env(work))
    if not (out / "summary.json").exists():
        raise RuntimeError(f"zqbench exited {code}:\n{log_tail(log)}")
    return zqbench_result(out, load, rnd, code, wall)


def zqbench_result(out: Path, load: Load, rnd: int, code: int, wall: float) -> Result:
    summary = json.loads((out / "summary.json").read_text())
    table = pq.read_table(out / "samples.parquet").to_pandas()
    ok = table[table["error"].isna() & table["status"].between(200, 299)]
    sends = table["t_send"].dropna().to_numpy() / 1e9
    ttft = ((ok["t_first_token"] - ok["t_send"]) / 1e9).dropna().to_numpy()
    metrics = summary["metrics"]
    span = float(ok["t_end"].max() / 1e9 - sends.min()) if len(ok) else 0.0
    return Result(
        tool="zqbench",
        rate=load.rate,
        round=rnd,
        seed=load.seed,
        sent=len(table),
        completed=len(ok),
        sent_rate=(len(sends) - 1) / float(np.ptp(sends)) if len(sends) > 1 else None,
        throughput=len(ok) / span if span > 0 else None,
        ttft_p50_ms=ms(metrics["ttft"].get("p50")),
        ttft_p99_ms=ms(metrics["ttft"].get("p99")),
        ttft_p50_nr_ms=ms(nearest_rank(ttft, 0.5)),
        ttft_p99_nr_ms=ms(nearest_rank(ttft, 0.99)),
        ttft_mean_ms=ms(mean(ttft)),
        tpot_p50_ms=ms(metrics["tpot"].get("p50")),
        mean_prompt_tokens=mean(ok["prompt_tokens"].dropna().to_numpy(dtype=float)),
        mean_output_tokens=mean(ok["output_tokens"].dropna().to_numpy(dtype=float)),
        wall_s=wall,
        exit_code=code,
        schedule_lag_p99_ms=ms(metrics["schedule_lag"].get("p99")),
        invalid=list(summary["validity"].get("reasons", [])),
        side_requests_ms=[p["ms"] for p in summary["target_resolution"].get("probes", [])],
    )


def run_vllm_bench(server: VllmServer, load: Load, rnd: int, work: Path) -> Result:
    name = f"vllm-{load.rate:g}-{rnd}"
    cmd = [
        *taskset(CLIENT_CPU),
        str(venv_dir() / "bin" / "python"),
        str(VLLM_DIR / "vllm_cli.py"),
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        server.base_url,
        "--model",
        server.model,
        "--tokenizer",
        str(model_dir()),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(load.prompt_tokens),
        "--random-output-len",
        str(load.max_tokens),
        "--request-rate",
        f"{load.rate:g}",
        "--num-prompts",
        str(load.requests),
        "--seed",
        str(load.seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",  # the per-request lists, for the common estimator
        "--result-dir",
        str(work),
        "--result-filename",
        f"{name}.json",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env |= {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    log = work / f"{name}.log"
    code, wall = run_logged(cmd, log, env)
    if not (work / f"{name}.json").exists():
        raise RuntimeError(f"vllm bench serve exited {code}:\n{log_tail(log)}")
    return vllm_result(work / f"{name}.json", load, rnd, code, wall)


def vllm_result(path: Path, load: Load, rnd: int, code: int, wall: float) -> Result:
    data = json.loads(path.read_text())
    ok = np.array([not err for err in data["errors"]], dtype=bool)
    starts = np.asarray(data["start_times"], dtype=float)
    ends = starts + np.asarray(data["latencies"], dtype=float)
    ttft = np.asarray(data["ttfts"], dtype=float)[ok]
    span = float(ends[ok].max() - starts.min()) if ok.any() else 0.0
    return Result(
        tool="vllm",
        rate=load.rate,
        round=rnd,
        seed=load.seed,
        sent=len(starts),
        completed=int(data["completed"]),
        sent_rate=(len(starts) - 1) / float(np.ptp(starts)) if len(starts) > 1 else None,
        throughput=int(ok.sum()) / span if span > 0 else None,
        ttft_p50_ms=data.get("p50_ttft_ms"),
        ttft_p99_ms=data.get("p99_ttft_ms"),
        ttft_p50_nr_ms=ms(nearest_rank(ttft, 0.5)),
        ttft_p99_nr_ms=ms(nearest_rank(ttft, 0.99)),
        ttft_mean_ms=ms(mean(ttft)),
        tpot_p50_ms=data.get("p50_tpot_ms"),
        # vllm bench replaces its own prompt length by usage.prompt_tokens when given.
        mean_prompt_tokens=mean(np.asarray(data["input_lens"], dtype=float)[ok]),
        mean_output_tokens=mean(np.asarray(data["output_lens"], dtype=float)[ok]),
        wall_s=wall,
        exit_code=code,
    )


def measure(server: VllmServer, tool: str, load: Load, rnd: int, work: Path) -> Result:
    wait_idle(server)
    before = scrape(server)
    loadavg = os.getloadavg()[0]
    run = run_zqbench if tool == "zqbench" else run_vllm_bench
    result = run(server, load, rnd, work)
    wait_idle(server)
    after = scrape(server)
    result.loadavg_1m = loadavg
    delta = {name: after[name] - before[name] for name in COUNTERS}
    result.server = delta
    side_s = sum(result.side_requests_ms) / 1000
    result.server_ttft_mean_ms = load_mean_ms(delta, "time_to_first_token_seconds", result, side_s)
    # Alone on an idle server, a side request did not queue.
    result.server_queue_mean_ms = load_mean_ms(delta, "request_queue_time_seconds", result, 0.0)
    if result.ttft_mean_ms is not None and result.server_ttft_mean_ms is not None:
        result.client_extra_ms = result.ttft_mean_ms - result.server_ttft_mean_ms
    return result


def load_mean_ms(
    delta: dict[str, float], histogram: str, result: Result, side_s: float
) -> float | None:
    """vLLM's mean over the load's requests alone, from its histogram's sum and count.

    side_s: the side requests' share of the sum, or a bound on it. They ran alone on an idle
    server before the load, and each one's client time bounds its server time, so the
    error left is at most that bound / N (under 0.5 ms in our runs). None when the counts
    do not add up (a request neither tool accounts for).
    """
    count = delta[f"{histogram}_count"] - len(result.side_requests_ms)
    if count != result.completed or count == 0:
        return None
    return ms((delta[f"{histogram}_sum"] - side_s) / count)


def run_all(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server = start_vllm(free_port(), work / "vllm.log")
    try:
        warm_up(server, Load(1.0, 2, args.prompt_tokens, args.max_tokens, 0), work)
        results: list[Result] = []
        for k, rate in enumerate(args.rates):
            for rnd in range(args.rounds):
                # A seed of its own for every round: vllm bench's random prompts are a
                # function of its seed, and a repeated one would find every prompt in vLLM's
                # prefix cache (measured: 7680 of a 60-request run's 8040 prompt tokens).
                seed = args.seed + k * args.rounds + rnd
                load = Load(rate, args.requests, args.prompt_tokens, args.max_tokens, seed)
                for tool in TOOLS:
                    result = measure(server, tool, load, rnd, work)
                    results.append(result)
                    print(json.dumps(asdict(result)), file=sys.stderr, flush=True)
        cold_start_s = server.started_s
    finally:
        server.stop()
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load": {
            "rates": args.rates,
            "rounds": args.rounds,
            "requests": args.requests,
            "prompt_tokens": args.prompt_tokens,
            "max_tokens": args.max_tokens,
            "seed": args.seed,
        },
        "machine": {"cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
        "vllm_cold_start_s": cold_start_s,
        "results": [asdict(r) for r in results],
    }


FIGURES = (
    ("ttft_p50_ms", "TTFT p50 ms (tool's own)"),
    ("ttft_p99_ms", "TTFT p99 ms (tool's own)"),
    ("ttft_p50_nr_ms", "TTFT p50 ms (nearest rank)"),
    ("ttft_p99_nr_ms", "TTFT p99 ms (nearest rank)"),
    ("ttft_mean_ms", "TTFT mean ms"),
    ("server_ttft_mean_ms", "TTFT mean ms, vLLM's own (server side)"),
    ("client_extra_ms", "TTFT mean, client minus server, ms"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("sent_rate", "arrival rate achieved, req/s"),
    ("throughput", "throughput, req/s"),
    ("mean_prompt_tokens", "prompt tokens (mean, usage)"),
    ("mean_output_tokens", "output tokens (mean, usage)"),
)


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def runs_table(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| req/s | round | tool | sent | done | arrivals req/s | throughput req/s "
        "| TTFT p50 ms | TTFT p99 ms | p50 / p99 nearest rank | TTFT mean ms: client, server "
        "| server queue mean ms | TPOT p50 ms | prompt tok | output tok | prefix-cache hits "
        "| zqbench lag p99 ms | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['rate']:g} | {r['round']} | {r['tool']} | {r['sent']} | {r['completed']} "
            f"| {fmt(r['sent_rate'], 2)} | {fmt(r['throughput'], 2)} "
            f"| {fmt(r['ttft_p50_ms'])} | {fmt(r['ttft_p99_ms'])} "
            f"| {fmt(r['ttft_p50_nr_ms'])} / {fmt(r['ttft_p99_nr_ms'])} "
            f"| {fmt(r['ttft_mean_ms'])}, {fmt(r['server_ttft_mean_ms'])} "
            f"| {fmt(r['server_queue_mean_ms'])} | {fmt(r['tpot_p50_ms'], 2)} "
            f"| {fmt(r['mean_prompt_tokens'])} | {fmt(r['mean_output_tokens'])} "
            f"| {r['server'].get('prefix_cache_hits_total', 0):.0f} "
            f"| {fmt(r['schedule_lag_p99_ms'])} | {r['loadavg_1m']:.1f} |"
        )
    return lines


def ratio_rows(results: list[dict[str, Any]], rate: float) -> list[str]:
    """Per figure: each tool's mean over the rounds, their ratio, and each round's ratio."""
    by = {(r["tool"], r["round"]): r for r in results if r["rate"] == rate}
    rounds = sorted({rnd for _, rnd in by})
    lines = []
    for key, label in FIGURES:
        means = {}
        for tool in TOOLS:
            vals = [by[(tool, n)][key] for n in rounds if by[(tool, n)][key] is not None]
            means[tool] = sum(vals) / len(vals) if vals else None
        per_round = ", ".join(
            fmt(ratio(by[("zqbench", n)][key], by[("vllm", n)][key]), 2) for n in rounds
        )
        lines.append(
            f"| {rate:g} | {label} | {fmt(means['zqbench'], 2)} | {fmt(means['vllm'], 2)} "
            f"| **{fmt(ratio(means['zqbench'], means['vllm']), 2)}** | {per_round} |"
        )
    return lines


def render(report: dict[str, Any]) -> str:
    load = report["load"]
    results = report["results"]
    lines = [
        f"# zqbench and vllm bench serve on one vLLM, {report['date']}",
        "",
        f"{load['requests']} requests per run, prompts of about {load['prompt_tokens']} tokens, "
        f"max {load['max_tokens']} output tokens, Poisson arrivals; {load['rounds']} rounds "
        f"per rate, the tools alternating (zqbench, vllm, zqbench, ...). vLLM cold start "
        f"{fmt(report['vllm_cold_start_s'])} s; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in report['machine']['loadavg_at_end'])}.",
        "",
        "What the figures mean, and why they differ: docs/performance.md, section "
        '"zqbench and vllm bench serve on the same vLLM".',
        "",
        "| req/s | figure | zqbench | vllm bench | zqbench / vllm | per round |",
        "|---|---|---|---|---|---|",
    ]
    for rate in load["rates"]:
        lines += ratio_rows(results, rate)
    lines += ["", "Every run:", "", *runs_table(results), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", default="4,12", help="req/s, comma-separated (4,12)")
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds per rate (3)")
    parser.add_argument("--requests", type=int, default=120, help="requests per run (120)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="prompt size (128)")
    parser.add_argument("--max-tokens", type=int, default=64, help="output cap (64)")
    parser.add_argument("--seed", type=int, default=0, help="first seed; every round its own (0)")
    parser.add_argument(
        "--out",
        type=Path,
        help="write OUT.json and OUT.md (e.g. docs/benchmarks/vllm-compare-2026-12-01)",
    )
    parser.add_argument("--keep", type=Path, help="keep every run's files in this folder")
    parser.add_argument(
        "--render", type=Path, metavar="JSON", help="only render a saved report's Markdown"
    )
    args = parser.parse_args(argv)
    args.rates = [float(r) for r in args.rates.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        sys.stdout.write(render(json.loads(args.render.read_text())))
        return 0
    if (reason := vllm_available()) is not None:
        print(f"vllm_compare: {reason}", file=sys.stderr)
        return 2
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run_all(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="vllm-compare-") as tmp:
            report = run_all(args, Path(tmp))
    text = render(report)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
