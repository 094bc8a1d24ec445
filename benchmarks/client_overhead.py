"""Client overhead against a token-tick mock server: how exactly a client reads fast streams.

Issue #43 item 1. The mock server (benchmarks/tickserver.c, C, one thread, epoll, pinned to
CPU 1 and run under SCHED_FIFO where allowed) writes one token event to every open stream
every `interval` ms and stamps each write with CLOCK_MONOTONIC; a client runs closed loop
(`vus` = streams, `max_tokens` tokens a request) pinned to CPU 0. Per point (streams x
interval x API x tool), against the server's own stamps:

- tokens/s parsed by the client (token events in its samples over the run's span), and the
  ratio to what the server offers (streams / interval; a closed loop loses about one tick a
  request between one request's end and the next one's first token, 1% at 100 tokens);
- TTFT error per request: the client's TTFT (first token event parsed minus send) minus the
  server's (first token written minus request read), p50 and p99 over requests;
- inter-token gaps: zqbench keeps, per request, its gaps' mean, p99 and max (not every token's
  time), so the error is taken per request: the client's ITL p99 minus the server's, whose
  gaps are summarised with zqbench's own estimator (`zqbench.dialects.itl.summarize_gaps`;
  with under 100 gaps its p99 is the largest gap); p50 and p99 over requests; beside it the
  issue's figure, the median and the p99 over requests of the client's per-request ITL p99;
- `last token lag`: when the client parsed a request's last token minus when the server wrote
  it (how far behind the stream the reader is at its end), p50 and p99 over requests;
- CPU per token: the client process's user+system time over the load's span (sampled from
  /proc/PID/stat every 20 ms), divided by the tokens parsed; and its peak RSS.

Peers (AIPerf, GuideLLM, `vllm bench serve`; `--tools`) run against the same server at the
same points: AIPerf and GuideLLM in venvs of their own under ~/.cache/zqbench/peers/ (made
once with `--install-peers`), vLLM's from the venv tests/vllm/setup.sh makes (its closed
loop: `--max-concurrency` streams, `--request-rate inf`, as many prompts as fill the time).
They report distributions, not per-request rows matched to ours, so for them the table
compares their own TTFT/ITL p50/p99 with the server's (the server's TTFT per request from its
log; its ITL from every gap it wrote), and their output token throughput with the server's.
Every tool's steady delivery comes from the server's log the same way (`server_figures`).

Reproduce (a quiet machine: nothing else on the two cores; ~2 minutes a point a tool):

    .venv/bin/python benchmarks/client_overhead.py --install-peers      # once, needs PyPI
    .venv/bin/python benchmarks/client_overhead.py \\
        --streams 10 50 250 1000 --interval-ms 1 5 20 --apis anthropic openai \\
        --tools zqbench aiperf guidellm vllm --seconds 20 \\
        --json co.json --md co.md --png co.png
    .venv/bin/python benchmarks/tickserver.py --streams 250 --interval-ms 5   # server alone

The smoke run of docs/performance.md ("Client overhead"):

    .venv/bin/python benchmarks/client_overhead.py --streams 10 50 --interval-ms 5 \\
        --apis openai --tools zqbench aiperf guidellm --seconds 10 \\
        --json docs/benchmarks/client-overhead-smoke-2026-12-06.json \\
        --md docs/benchmarks/client-overhead-smoke-2026-12-06.md \\
        --png docs/benchmarks/client-overhead-smoke-2026-12-06.png

HTTP/2: `--http 1.1 2` adds zqbench's points over h2c (prior knowledge; the tick server,
built with libnghttp2, allows 128 streams a connection as nginx does, so 250 streams take two
connections). The peers run over HTTP/1.1 only: AIPerf and `vllm bench serve` speak nothing
else (aiohttp).

    .venv/bin/python benchmarks/client_overhead.py --http 1.1 2 --streams 50 250 1000 \\
        --interval-ms 5 --apis openai anthropic --tools zqbench --seconds 20 --no-server-alone
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from tickserver import (  # noqa: E402
    ServerLog,
    TickServer,
    build,
    measure_alone,
    pinned,
    speaks_h2c,
)

from zqbench.dialects.itl import summarize_gaps  # noqa: E402

PEERS = Path.home() / ".cache" / "zqbench" / "peers"
PEER_VERSIONS = {"aiperf": "aiperf==0.13.0", "guidellm": "guidellm==0.8.1"}
TOKENIZER = Path.home() / ".cache" / "zqbench" / "tiny-llama"  # tests/vllm's tiny model
VLLM_VENV = Path(os.environ.get("ZQ_VLLM_VENV", Path.home() / ".cache" / "zqbench" / "vllm-venv"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def pct(values: np.ndarray | list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100), None for no values."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0:
        return None
    return float(v[max(1, int(np.ceil(q / 100 * len(v)))) - 1])


def r3(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


class CpuSampler:
    """User+system CPU seconds of one process, sampled from /proc every `every` s, with the
    perf_counter_ns of each sample (the clock of the server's stamps and zqbench's samples)."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[int, float]] = []
        self.peak_rss_kib = 0  # VmHWM, the process's own high-water mark (see run_measured)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> float | None:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def _hwm(self) -> None:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
                    return

    def _run(self) -> None:
        while not self._stop.is_set():
            cpu = self._read()
            if cpu is None:
                return
            self.samples.append((time.perf_counter_ns(), cpu))
            self._hwm()
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def between(self, t0: int, t1: int) -> float | None:
        """CPU seconds used between perf_counter_ns t0 and t1 (interpolated)."""
        if len(self.samples) < 2:
            return None
        ts = np.array([s[0] for s in self.samples], dtype=float)
        cs = np.array([s[1] for s in self.samples])
        return float(np.interp(t1, ts, cs) - np.interp(t0, ts, cs))


def run_measured(
    cmd: list[str], cwd: Path, timeout: float, log: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a client in a session of its own; its exit code, wall time, CPU (rusage of it and
    the children it waited for), peak RSS, and a CpuSampler of the top process. Past
    `timeout` its process group (its own PID) gets SIGTERM, then SIGKILL."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        sampler = CpuSampler(proc.pid)
        t0 = time.monotonic()
        got = _reap(proc.pid, timeout)
        if got is None:
            os.killpg(proc.pid, signal.SIGTERM)
            got = _reap(proc.pid, 15)
            if got is None:
                os.killpg(proc.pid, signal.SIGKILL)
                got = _reap(proc.pid, 15)
        assert got is not None, f"{cmd[0]} (pid {proc.pid}) did not end"
        status, usage = got
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        # Whatever it left behind in its group (a peer's helper processes).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    return {
        "exit": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 2),
        "cpu_s_total": round(usage.ru_utime + usage.ru_stime, 3),
        "cpu_s_user": round(usage.ru_utime, 3),  # the kernel's share is the rest
        "cpu_s_system": round(usage.ru_stime, 3),
        # Not wait4's ru_maxrss: Linux carries it across exec, so every child of this
        # process (which grows as it reads the server's logs) reported at least this
        # process's own peak (the 2026-12-07 sweep's 362.5 MiB rows). VmHWM is the child's
        # (its top process only: a peer's worker processes are not in it).
        "peak_rss_mib": round(sampler.peak_rss_kib / 1024, 1),
        "sampler": sampler,
    }


def _reap(pid: int, seconds: float) -> tuple[int, Any] | None:
    """wait4 our child `pid` for up to `seconds`: (status, rusage), or None."""
    deadline = time.monotonic() + seconds
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got:
            return status, usage
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# ---------------------------------------------------------------- the server's own figures


STEADY_FROM_S = 1.0  # the steady window starts this long after the server's first token


def server_figures(log: ServerLog, point: dict[str, Any]) -> dict[str, Any]:
    """The server's truth over its complete requests: TTFT and every gap it wrote; and the
    steady delivery, the same for every tool: the tokens it wrote from STEADY_FROM_S after
    its first one to the load's end, over what it offers in that window. In a closed loop
    the server writes a token only to a stream whose request the client sent, and every
    request the client parsed was whole, so a client that falls behind writes less here.
    Unlike tokens/s over the run's span, it leaves out the start and the end, where one
    user starting a last request just before the end stretched the span by a request's
    length (0.976 instead of 0.99 at 20 s)."""
    tokens = point["tokens"]
    per = log.per_request()
    recv = {r["seq"]: r["t_recv_ns"] for r in log.requests}
    ttft, gaps = [], []
    for seq, t in per.items():
        if len(t) == tokens and seq in recv:
            ttft.append((t[0] - recv[seq]) / 1e6)
            gaps.append(np.diff(t) / 1e6)
    allgaps = np.concatenate(gaps) if gaps else np.array([])
    span = (log.tokens["t"].max() - log.tokens["t"].min()) / 1e9 if len(log.tokens) else 0
    steady = None
    window_s = point["seconds"] - STEADY_FROM_S
    if len(log.tokens) and window_s > 0:
        t0 = log.tokens["t"].min() + STEADY_FROM_S * 1e9
        t = log.tokens["t"]
        written = np.count_nonzero((t >= t0) & (t < t0 + window_s * 1e9))
        offered = point["streams"] * 1000 / point["interval_ms"]
        steady = round(written / window_s / offered, 4)
    return {
        "steady_delivered_ratio": steady,
        "srv_requests": len(ttft),
        "srv_tokens_per_s": round(len(log.tokens) / span) if span else None,
        "srv_ttft_p50_ms": r3(pct(ttft, 50)),
        "srv_ttft_p99_ms": r3(pct(ttft, 99)),
        "srv_itl_p50_ms": r3(pct(allgaps, 50)),
        "srv_itl_p99_ms": r3(pct(allgaps, 99)),
        "srv_deferred_tokens": log.deferred(),
        **{f"srv_{k}": v for k, v in log.tick_stats().items()},
    }


# ---------------------------------------------------------------- zqbench

SCENARIO = """
name = "client-overhead"
description = "closed loop against the token-tick mock server (benchmarks/client_overhead.py)"
api = "{api}"
[load]
executor = "constant-vus"
vus = {vus}
duration = "{seconds}s"
graceful_stop = "30s"
[request]
max_tokens = {tokens}
stream = true
timeout = "60s"
prompt_tokens = 16
"""


def run_zqbench(
    srv: TickServer, point: dict[str, Any], folder: Path, extra: list[str]
) -> dict[str, Any]:
    scen = folder / "scenario.toml"
    scen.write_text(
        SCENARIO.format(
            api=point["api"], vus=point["streams"], seconds=point["seconds"], tokens=point["tokens"]
        )
    )
    out = folder / "zq"
    cmd = [
        *pinned(0),
        sys.executable,
        "-m",
        "zqbench",
        "run",
        str(scen),
        "--target",
        srv.url,
        "--api",
        point["api"],
        "--model",
        "mock",
        "--calibration",
        "off",
        "--no-server-metrics",
        "--max-connections",
        str(max(1024, point["streams"])),
        "--warm-connections",
        str(point["streams"]),
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]
    proc = run_measured(cmd, REPO, point["seconds"] + 120, folder / "zqbench.log")
    srv.stop()
    log = srv.log()
    row = {"tool": "zqbench", **point, "exit": proc["exit"], "peak_rss_mib": proc["peak_rss_mib"]}
    for key in ("cpu_s_total", "cpu_s_user", "cpu_s_system"):
        row[key] = proc[key]
    samples = out / "samples.parquet"
    if not samples.exists():
        row["failed"] = f"no samples.parquet (exit {proc['exit']}); see {folder / 'zqbench.log'}"
        return row
    row.update(compare_zqbench(samples, log, point, proc["sampler"]))
    row.update(server_figures(log, point))
    return row


def compare_zqbench(
    samples: Path, log: ServerLog, point: dict[str, Any], sampler: CpuSampler
) -> dict[str, Any]:
    import pyarrow.parquet as pq

    table = pq.read_table(samples)
    start = int(table.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    rows = table.to_pylist()
    by_xid = {r["x_request_id"]: r for r in log.requests}
    per = log.per_request()
    ok = [r for r in rows if r["error"] is None]
    ttft_err, itl_err, itl_client, last_lag, first_lag, own_ttft = [], [], [], [], [], []
    unmatched = 0
    for r in ok:
        s = by_xid.get(f"zq-{r['request_id']}")
        t = per.get(s["seq"]) if s else None
        if s is None or t is None or len(t) != point["tokens"] or r["t_first_token"] is None:
            unmatched += 1
            continue
        srv_ttft = t[0] - s["t_recv_ns"]
        own_ttft.append((r["t_first_token"] - r["t_send"]) / 1e6)
        ttft_err.append(((r["t_first_token"] - r["t_send"]) - srv_ttft) / 1e6)
        first_lag.append((r["t_first_token"] + start - t[0]) / 1e6)
        last_lag.append((r["t_last_token"] + start - t[-1]) / 1e6)
        _, srv_p99, _ = summarize_gaps(np.diff(t).tolist())
        if r["itl_p99_ns"] is not None and srv_p99 is not None:
            itl_err.append((r["itl_p99_ns"] - srv_p99) / 1e6)
            itl_client.append(r["itl_p99_ns"] / 1e6)
    t0 = min(r["t_send"] for r in rows)
    t1 = max(r["t_end"] for r in rows)
    span = (t1 - t0) / 1e9
    parsed = sum(r["n_chunks"] for r in rows)
    cpu = sampler.between(start + t0, start + t1)
    offered = point["streams"] * 1000 / point["interval_ms"]
    return {
        "requests": len(rows),
        "errors": len(rows) - len(ok),
        "unmatched": unmatched,
        "tokens_per_s": round(parsed / span) if span else None,
        "offered_per_s": round(offered),
        "delivered_ratio": round(parsed / span / offered, 4) if span else None,
        "peer_ttft_p50_ms": r3(pct(own_ttft, 50)),  # its own TTFT, as the peers' columns
        "peer_ttft_p99_ms": r3(pct(own_ttft, 99)),
        "ttft_err_p50_ms": r3(pct(ttft_err, 50)),
        "ttft_err_p99_ms": r3(pct(ttft_err, 99)),
        "first_token_lag_p50_ms": r3(pct(first_lag, 50)),
        "first_token_lag_p99_ms": r3(pct(first_lag, 99)),
        "itl_p99_err_p50_ms": r3(pct(itl_err, 50)),
        "itl_p99_err_p99_ms": r3(pct(itl_err, 99)),
        "itl_p99_median_ms": r3(pct(itl_client, 50)),
        "itl_p99_p99_ms": r3(pct(itl_client, 99)),
        "last_token_lag_p50_ms": r3(pct(last_lag, 50)),
        "last_token_lag_p99_ms": r3(pct(last_lag, 99)),
        "cpu_s_load": r3(cpu),
        "cpu_us_per_token": round(cpu / parsed * 1e6, 2) if cpu and parsed else None,
    }


# ---------------------------------------------------------------- peers


def install_peers() -> None:
    PEERS.mkdir(parents=True, exist_ok=True)
    for name, spec in PEER_VERSIONS.items():
        venv = PEERS / name
        if not (venv / "bin" / name).exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", spec], check=True, timeout=1800
            )
        print(f"{name}: {venv / 'bin' / name}")


def peer_exe(tool: str) -> Path:
    """The peer's command: its own venv's, or for vLLM the interpreter of tests/vllm's venv
    (made by tests/vllm/setup.sh), which runs `vllm` through tests/vllm/vllm_cli.py."""
    if tool == "vllm":
        return VLLM_VENV / "bin" / "python"
    return PEERS / tool / "bin" / tool


def peer_cmd(tool: str, srv: TickServer, point: dict[str, Any], out: Path) -> list[str]:
    exe = str(peer_exe(tool))
    n, secs, tokens = point["streams"], point["seconds"], point["tokens"]
    if tool == "vllm":
        # Closed loop at `n` concurrent requests, as many as fill `secs` at the server's pace.
        prompts = max(n, round(n * secs * 1000 / (tokens * point["interval_ms"])))
        return [
            *pinned(0),
            exe,
            str(REPO / "tests" / "vllm" / "vllm_cli.py"),
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/chat/completions",
            "--base-url",
            srv.url,
            "--model",
            "mock",
            "--tokenizer",
            str(TOKENIZER),
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            str(tokens),
            "--request-rate",
            "inf",
            "--max-concurrency",
            str(n),
            "--num-prompts",
            str(prompts),
            "--percentile-metrics",
            "ttft,tpot,itl",
            "--metric-percentiles",
            "50,99",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            str(out),
            "--result-filename",
            "vllm.json",
        ]
    if tool == "aiperf":
        return [
            *pinned(0),
            exe,
            "profile",
            "--model",
            "mock",
            "--url",
            srv.url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            str(n),
            "--benchmark-duration",
            str(secs),
            "--benchmark-grace-period",
            "30",
            "--isl",
            "16",
            "--isl-stddev",
            "0",
            "--osl",
            str(tokens),
            "--osl-stddev",
            "0",
            "--tokenizer",
            str(TOKENIZER),
            "--use-server-token-count",
            "--artifact-dir",
            str(out),
            "--no-gpu-telemetry",
            "--no-server-metrics",
            "--ui",
            "none",
        ]
    if tool == "guidellm":
        return [
            *pinned(0),
            exe,
            "run",
            "--backend",
            f"kind=openai_http,target={srv.url},model=mock",
            "--profile",
            f"kind=concurrent,streams={n}",
            "--constraint",
            f"kind=max_duration,seconds={secs:g}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
            "--tokenizer",
            f"kind=huggingface_auto,model={TOKENIZER}",
            "--output",
            f"kind=json,path={out / 'guidellm.json'}",
            "--disable-console-interactive",
        ]
    raise ValueError(tool)


def run_peer(tool: str, srv: TickServer, point: dict[str, Any], folder: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"tool": tool, **point}
    if not peer_exe(tool).exists():
        how = "tests/vllm/setup.sh" if tool == "vllm" else "--install-peers"
        row["failed"] = f"not installed ({peer_exe(tool)}; {how})"
        return row
    out = folder / tool
    out.mkdir(parents=True, exist_ok=True)
    env_log = folder / f"{tool}.log"
    # GuideLLM reads the local tokenizer offline; AIPerf 0.13 in offline mode looks a local
    # path up as a Hub repo and fails, so it runs without (nothing off the machine is reachable).
    env = dict(os.environ)
    if tool in ("guidellm", "vllm"):
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if tool == "vllm":
        env.update(VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    cmd = peer_cmd(tool, srv, point, out)
    (folder / f"{tool}.cmd").write_text(" ".join(cmd) + "\n")
    proc = run_measured(cmd, folder, point["seconds"] + 240, env_log, env)
    srv.stop()
    log = srv.log()
    row.update(
        {
            "exit": proc["exit"],
            "cpu_s_total": proc["cpu_s_total"],
            "peak_rss_mib": proc["peak_rss_mib"],
            "offered_per_s": round(point["streams"] * 1000 / point["interval_ms"]),
        }
    )
    row.update(server_figures(log, point))
    try:
        row.update(read_peer(tool, out))
    except Exception as exc:  # the peer's own failure is recorded, not raised
        tail = env_log.read_text(errors="replace")[-600:] if env_log.exists() else ""
        row["failed"] = f"{type(exc).__name__}: {exc}; exit {proc['exit']}; log tail: {tail}"
    if row.get("peer_output_tokens_per_s") and row.get("srv_tokens_per_s"):
        row["tokens_per_s"] = round(row["peer_output_tokens_per_s"])
        row["delivered_ratio"] = round(row["tokens_per_s"] / row["offered_per_s"], 4)
    return row


def _find(folder: Path, pattern: str) -> Path:
    found = sorted(folder.rglob(pattern))
    if not found:
        raise FileNotFoundError(f"no {pattern} under {folder}")
    return found[0]


def read_peer(tool: str, out: Path) -> dict[str, Any]:
    """The peer's own TTFT, ITL (ms) and output token throughput, from its JSON output."""
    if tool == "aiperf":
        data = json.loads(_find(out, "profile_export_aiperf.json").read_text())

        def m(key: str, stat: str) -> float | None:
            v = data.get(key) or {}
            return v.get(stat)

        return {
            "peer_ttft_p50_ms": r3(m("time_to_first_token", "p50")),
            "peer_ttft_p99_ms": r3(m("time_to_first_token", "p99")),
            "peer_itl_p50_ms": r3(m("inter_token_latency", "p50")),
            "peer_itl_p99_ms": r3(m("inter_token_latency", "p99")),
            "peer_output_tokens_per_s": r3(m("output_token_throughput", "avg")),
            "peer_requests": m("request_count", "avg"),
        }
    if tool == "vllm":
        data = json.loads((out / "vllm.json").read_text())
        return {
            "peer_ttft_p50_ms": r3(data.get("p50_ttft_ms")),
            "peer_ttft_p99_ms": r3(data.get("p99_ttft_ms")),
            "peer_itl_p50_ms": r3(data.get("p50_itl_ms")),
            "peer_itl_p99_ms": r3(data.get("p99_itl_ms")),
            "peer_output_tokens_per_s": r3(data.get("output_throughput")),
            "peer_requests": data.get("completed"),
        }
    data = json.loads(_find(out, "*.json").read_text())
    bench = data["benchmarks"][0]
    metrics = bench["metrics"]

    def g(key: str, stat: str) -> float | None:
        succ = (metrics.get(key) or {}).get("successful") or {}
        if stat == "mean":
            return succ.get("mean")
        return (succ.get("percentiles") or {}).get(stat)

    return {
        "peer_ttft_p50_ms": r3(g("time_to_first_token_ms", "p50")),
        "peer_ttft_p99_ms": r3(g("time_to_first_token_ms", "p99")),
        "peer_itl_p50_ms": r3(g("inter_token_latency_ms", "p50")),
        "peer_itl_p99_ms": r3(g("inter_token_latency_ms", "p99")),
        "peer_output_tokens_per_s": r3(g("output_tokens_per_second", "mean")),
    }


# ---------------------------------------------------------------- outputs

COLUMNS = [
    ("tool", "tool"),
    ("api", "API"),
    ("http", "HTTP"),
    ("streams", "streams"),
    ("interval_ms", "interval ms"),
    ("tokens_per_s", "tokens/s parsed"),
    ("delivered_ratio", "delivered/offered"),
    ("steady_delivered_ratio", "steady delivered/offered"),
    ("ttft_err_p50_ms", "TTFT err p50 ms"),
    ("ttft_err_p99_ms", "TTFT err p99 ms"),
    ("itl_p99_err_p50_ms", "ITL p99 err p50 ms"),
    ("itl_p99_err_p99_ms", "ITL p99 err p99 ms"),
    ("itl_p99_median_ms", "ITL p99 median ms"),
    ("last_token_lag_p99_ms", "last token lag p99 ms"),
    ("peer_ttft_p50_ms", "own TTFT p50 / p99 ms"),
    ("peer_itl_p50_ms", "own ITL p50 / p99 ms"),
    ("srv_ttft_p50_ms", "server TTFT p50 / p99 ms"),
    ("srv_itl_p50_ms", "server ITL p50 / p99 ms"),
    ("cpu_us_per_token", "CPU us/token (load span)"),
    ("cpu_s_total", "CPU s, whole run"),
    ("peak_rss_mib", "peak RSS MiB"),
]
PAIRS = {
    "peer_ttft_p50_ms": "peer_ttft_p99_ms",
    "peer_itl_p50_ms": "peer_itl_p99_ms",
    "srv_ttft_p50_ms": "srv_ttft_p99_ms",
    "srv_itl_p50_ms": "srv_itl_p99_ms",
}


def cell(row: dict[str, Any], key: str) -> str:
    if key == "tool" and row.get("failed"):
        return f"{row['tool']} (failed)"
    v = row.get(key, "1.1" if key == "http" else None)  # rows saved before HTTP/2 points
    if key == "tokens_per_s" and v is not None:
        return str(round(v))
    if key in PAIRS:
        w = row.get(PAIRS[key])
        return "-" if v is None and w is None else f"{v} / {w}"
    return "-" if v is None else str(v)


def markdown(rows: list[dict[str, Any]], alone: list[dict[str, Any]]) -> str:
    lines = []
    if alone:
        lines += [
            "Server alone (its own C client on CPU 0):",
            "",
            "| streams | interval ms | tokens/s | tick lateness p50 / p99 / max ms | "
            "write spread p50 / p99 ms |",
            "|---|---|---|---|---|",
        ]
        for a in alone:
            lines.append(
                f"| {a['streams']} | {a['interval_ms']} | {a['tokens_per_s']} | "
                f"{a.get('lateness_p50_ms')} / {a.get('lateness_p99_ms')} / "
                f"{a.get('lateness_max_ms')} | {a.get('write_spread_p50_ms')} / "
                f"{a.get('write_spread_p99_ms')} |"
            )
        lines.append("")
    lines.append("| " + " | ".join(h for _, h in COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in rows:
        lines.append("| " + " | ".join(cell(r, k) for k, _ in COLUMNS) + " |")
    fails = [r for r in rows if r.get("failed")]
    for r in fails:
        lines.append("")
        lines.append(f"- {r['tool']} at {r['streams']} x {r['interval_ms']} ms: {r['failed']}")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    groups: dict[tuple[str, str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        if not r.get("failed"):
            key = (r["tool"], r["api"], r.get("http", "1.1"), r["interval_ms"])
            groups.setdefault(key, []).append(r)
    for (tool, api, http, ms), rs in sorted(groups.items()):
        rs.sort(key=lambda r: r["streams"])
        x = [r["offered_per_s"] for r in rs]
        label = f"{tool} {api}{' h2' if http == '2' else ''} {ms:g} ms"
        delivered = [r.get("steady_delivered_ratio") or r.get("delivered_ratio") for r in rs]
        axes[0].plot(x, delivered, "o-", label=label)
        # zqbench: its own ITL p99 (median over requests); peers: their reported ITL p99;
        # both against the server's interval.
        itl = [r.get("itl_p99_median_ms") or r.get("peer_itl_p99_ms") for r in rs]
        axes[1].plot(x, [None if v is None else v - ms for v in itl], "o-", label=label)
    axes[0].set(xscale="log", xlabel="offered tokens/s", ylabel="delivered / offered (steady)")
    axes[1].set(
        xscale="log",
        xlabel="offered tokens/s",
        ylabel="ITL p99 minus the interval, ms",
        title="zqbench: median of per-request p99; peers: their p99",
    )
    axes[0].axhline(0.97, color="grey", lw=0.5)
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[10, 50, 250, 1000])
    ap.add_argument("--interval-ms", type=float, nargs="+", default=[1, 5, 20])
    ap.add_argument("--apis", nargs="+", default=["anthropic", "openai"])
    ap.add_argument("--tools", nargs="+", default=["zqbench", "aiperf", "guidellm", "vllm"])
    ap.add_argument("--tokens", type=int, default=100, help="tokens a request")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--no-realtime", action="store_true", help="no SCHED_FIFO for the server")
    ap.add_argument("--no-server-alone", action="store_true")
    ap.add_argument("--http", nargs="+", choices=["1.1", "2"], default=["1.1"])
    ap.add_argument("--keep", type=Path, help="keep every run's files in this folder")
    ap.add_argument("--install-peers", action="store_true", help="make the peers' venvs; exit")
    ap.add_argument("--render", type=Path, help="only write --md/--png from this saved --json")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--png", type=Path)
    args = ap.parse_args()
    if args.install_peers:
        install_peers()
        return 0
    if args.render:
        saved = json.loads(args.render.read_text())
        md = markdown(saved["rows"], saved["server_alone"])
        print(md)
        if args.md:
            args.md.write_text(md)
        if args.png:
            plot(saved["rows"], args.png)
        return 0
    if "2" in args.http:
        with tempfile.TemporaryDirectory() as tmp:
            h2c = speaks_h2c(build(Path(tmp)))
        if not h2c:  # before any point runs, not after the HTTP/1.1 ones
            print(
                "client_overhead: the tick server builds without h2c here; "
                "apt-get install libnghttp2-dev, or leave out --http 2",
                file=sys.stderr,
            )
            return 2
    realtime = not args.no_realtime
    alone = []
    if not args.no_server_alone:
        for n in args.streams:
            for ms in args.interval_ms:
                a = measure_alone(n, ms, args.tokens, min(args.seconds, 10), "openai", realtime)
                print(json.dumps(a), flush=True)
                alone.append(a)
    rows: list[dict[str, Any]] = []
    base = args.keep or Path(tempfile.mkdtemp(prefix="client-overhead-"))
    try:
        for http, api, ms, n, tool in itertools.product(
            args.http, args.apis, args.interval_ms, args.streams, args.tools
        ):
            if tool != "zqbench" and (api != "openai" or http != "1.1"):
                continue  # the peers' chat route over HTTP/1.1 only
            point = {
                "api": api,
                "http": http,
                "streams": n,
                "interval_ms": ms,
                "tokens": args.tokens,
                "seconds": args.seconds,
            }
            folder = base / f"{tool}-{api}-{n}-{ms:g}{'-h2' if http == '2' else ''}"
            folder.mkdir(parents=True, exist_ok=True)
            srv = TickServer(
                interval_us=int(ms * 1000),
                tokens=args.tokens,
                realtime=realtime,
                folder=folder / "server",
                max_seconds=args.seconds + 600,
            )
            with srv:
                if tool == "zqbench":
                    row = run_zqbench(srv, point, folder, ["--http2"] if http == "2" else [])
                else:
                    row = run_peer(tool, srv, point, folder)
            row["server_realtime"] = srv.realtime
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    md = markdown(rows, alone)
    print(md)
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
        "argv": sys.argv[1:],
    }
    if args.json:
        args.json.write_text(json.dumps({**meta, "server_alone": alone, "rows": rows}, indent=1))
    if args.md:
        args.md.write_text(md)
    if args.png:
        plot(rows, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
