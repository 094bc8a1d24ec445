"""One open-loop run against the programmed server, compared request by request with its truth.

Shared by `tests/core/test_accuracy.py` (bounds a busy machine meets) and
`benchmarks/accuracy.py` (the sub-millisecond figures, measured on a quiet machine).

The programmed server (tests/servers) stamps `perf_counter_ns()` just before each write and
keys it by the `x-request-id` zqbench sends; both processes share CLOCK_MONOTONIC, so each
sample is compared with the truth of the very same request.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from tests.servers import ProgrammedServer
from zqbench.pipeline.run import RunOptions, run_scenario

OPEN_LOOP = """
name = "accuracy"
description = "programmed latency"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = {rate}
duration = "{duration}"
[request]
max_tokens = 8
stream = true
timeout = "20s"
prompt_tokens = 16
"""

# Head at 10 ms, tokens at 20, 25, ... 55 ms after the server read the request.
PROGRAM = "x-program: /anthropic?n=8&every=5&first=20&head=10"
HEAD_MS, FIRST_TOKEN_MS = 10.0, 20.0


@dataclass(frozen=True)
class Accuracy:
    """Median errors (client interval minus the server's, ms) and what the summary says."""

    requests: int
    errors: int  # samples with an error (a timeout, a reset): none expected
    early: int  # samples that saw the first token before the server wrote it: never
    medians_ms: dict[str, float]  # ttfb, ttft, latency; and where the time went: send, ...
    p99s_ms: dict[str, float]  # the same errors' per-request p99
    ttft_p50_ms: float  # summary.json's TTFT p50 (programmed: 20 ms plus the error)
    ttfb_p50_ms: float  # summary.json's TTFB p50 (programmed: 10 ms plus the error)
    schedule_lag_p99_ms: float  # how busy the client machine was


def measure(server: ProgrammedServer, out: Path, *, rate: float, duration_s: float) -> Accuracy:
    """One run of `rate` req/s for `duration_s` against `server`, written under `out`."""
    scenario = out / "accuracy.toml"
    out.mkdir(parents=True, exist_ok=True)
    scenario.write_text(OPEN_LOOP.format(rate=rate, duration=f"{duration_s}s"))
    server.reset()
    result = run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=server.url,
            model="m",
            headers=(PROGRAM,),
            out=out / "run",
            calibration="off",  # no probe requests among the server's truth
            html=False,
        )
    )
    errors, requests, failed, early = compare_with_truth(result.out_dir / "samples.parquet", server)
    metrics = result.summary.metrics
    return Accuracy(
        requests=requests,
        errors=failed,
        early=early,
        medians_ms={k: round(statistics.median(v), 3) for k, v in errors.items() if v},
        p99s_ms={k: round(p99(v), 3) for k, v in errors.items() if v},
        ttft_p50_ms=round(metrics["ttft"].p50 * 1e3, 3),
        ttfb_p50_ms=round(metrics["ttfb"].p50 * 1e3, 3),
        schedule_lag_p99_ms=round(metrics["schedule_lag"].p99 * 1e3, 3),
    )


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def compare_with_truth(
    samples: Path, server: ProgrammedServer
) -> tuple[dict[str, list[float]], int, int, int]:
    """Per-request errors (client interval minus the server's, ms) of a run's samples.parquet
    against the server's truth: the errors by kind, the samples, the failed ones, the early
    ones. Reads only the columns and metadata every zqbench since 2026-11 writes, so that
    benchmarks/accuracy_ab.py judges older commits with the same ruler."""
    table = pq.read_table(samples)
    start = int(table.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    truth = server.all_truth()["truth"]
    rows = table.to_pylist()
    errors: dict[str, list[float]] = {
        k: [] for k in ("ttfb", "ttft", "latency", "send", "head_delivery", "token_delivery")
    }
    failed = early = 0
    for r in rows:
        if r["error"] is not None:
            failed += 1
            continue
        t = truth[f"zq-{r['request_id']}"]
        first = t["t_chunks"][1]  # t_chunks[0] is the preamble
        errors["ttfb"].append(((r["t_headers"] - r["t_send"]) - (t["t_head"] - t["t_recv"])) / 1e6)
        errors["ttft"].append(((r["t_first_token"] - r["t_send"]) - (first - t["t_recv"])) / 1e6)
        errors["latency"].append(((r["t_end"] - r["t_send"]) - (t["t_end"] - t["t_recv"])) / 1e6)
        # Where the time went: the send path, or the delivery of the head or the token.
        errors["send"].append((t["t_recv"] - (r["t_send"] + start)) / 1e6)
        errors["head_delivery"].append((r["t_headers"] + start - t["t_head"]) / 1e6)
        errors["token_delivery"].append((r["t_first_token"] + start - first) / 1e6)
        early += r["t_first_token"] + start < first
    return errors, len(rows), failed, early
