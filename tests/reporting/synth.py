"""Synthetic saved runs: samples.parquet + summary.json written by the real summarize().

Vectorised, so the 1,000,000-sample benchmark (benchmarks/report.py) uses it too.
Latency of successful requests is `latency_ms` (an array, or a seeded lognormal),
plus `shift_ms`; a `refused` share answers 503 in about 1 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import RunInfo, summarize
from zqbench.outputs.json_out import write_summary
from zqbench.samples.sample import ARROW_SCHEMA
from zqbench.summary import Summary
from zqbench.telemetry.table import GPU_TABLE

MS = 1_000_000
START_EPOCH_NS = 1_764_412_345_000_000_000


def write_synthetic_run(
    out_dir: Path,
    *,
    n: int = 2000,
    duration_s: float = 20.0,
    seed: int = 0,
    latency_ms: np.ndarray | None = None,
    shift_ms: float = 0.0,
    refused: float = 0.0,
    slos: Sequence[str] = ("latency:p99<100ms", "errors:rate<5%"),
    classes: Sequence[str] = ("short", "long"),
    headers: bool = True,
    gpu: bool = False,
    target: str = "http://user:hunter2@127.0.0.1:8000/v1?api_key=sk-secret-0123456789",
) -> Summary:
    """Write a run folder and return its summary."""
    rng = np.random.default_rng(seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_intended = np.sort(rng.uniform(0, duration_s * 1e9, n)).astype(np.int64)
    lag = rng.exponential(50_000, n).astype(np.int64)  # 50 µs
    t_send = t_intended + lag
    if latency_ms is None:
        latency_ms = rng.lognormal(np.log(20.0), 0.3, n)
    lat_ns = ((np.asarray(latency_ms, dtype=np.float64) + shift_ms) * MS).astype(np.int64)
    failed = rng.random(n) < refused
    lat_ns = np.where(failed, MS, lat_ns)
    ttft_ns = np.where(failed, 0, lat_ns // 10)
    out_tokens = np.where(failed, 0, 32)
    stage = np.searchsorted([duration_s * 0.4e9, duration_s * 0.6e9], t_intended, side="right")
    send_epoch_s = (START_EPOCH_NS + t_send) / 1e9
    queue_s = rng.exponential(100e-6, n)
    columns: dict[str, Any] = {
        "request_id": np.arange(n),
        "worker": np.zeros(n, np.int32),
        "stage": stage.astype(np.int32),
        "request_class": np.array(classes, dtype=object)[rng.integers(0, len(classes), n)],
        "t_intended": t_intended,
        "t_send": t_send,
        "t_headers": t_send + ttft_ns // 2,
        "t_first_token": np.where(failed, None, t_send + ttft_ns),
        "t_last_token": np.where(failed, None, t_send + lat_ns),
        "t_end": t_send + lat_ns,
        "status": np.where(failed, 503, 200).astype(np.int32),
        "error": np.where(failed, "http_503", None),
        "prompt_tokens": np.full(n, 32),
        "output_tokens": out_tokens,
        "tokens_from_usage": np.ones(n, bool),
        "itl_mean_ns": np.where(failed, None, (lat_ns - ttft_ns) // 31),
        "itl_p99_ns": np.where(failed, None, (lat_ns - ttft_ns) // 20),
        "itl_max_ns": np.where(failed, None, (lat_ns - ttft_ns) // 15),
        "n_chunks": out_tokens.astype(np.int32),
        "srv_received": send_epoch_s + 50e-6 if headers else None,
        "srv_dispatch": np.where(failed, np.nan, send_epoch_s + 50e-6 + queue_s)
        if headers
        else None,
        "srv_start": np.where(failed, np.nan, send_epoch_s + 80e-6 + queue_s) if headers else None,
        "srv_gpu_ms": None,
        "http_version": "1.1",
        "bytes_in": np.full(n, 1000),
        "retry_after_s": None,
        "source_row": None,
        "cached_tokens": None,
        "session": None,
        "turn": None,
        "resent": np.zeros(n, dtype=bool),
        "connection_wait": np.zeros(n, dtype=np.int64),
        "t_first_answer": np.where(failed, None, t_send + ttft_ns),  # text answers, no thinking
        "carried": np.where(failed, 0, 2).astype(np.int32),
        "reasoning_tokens": None,
        "reasoning_from_usage": np.zeros(n, dtype=bool),
        "tool_calls": np.zeros(n, dtype=np.int32),
    }
    arrays = []
    for field in ARROW_SCHEMA:
        value = columns[field.name]
        if value is None or isinstance(value, str):
            arrays.append(pa.array([value] * n, type=field.type))
        elif value.dtype == object:
            arrays.append(pa.array(list(value), type=field.type))
        else:
            arrays.append(pa.array(value, type=field.type, from_pandas=True))
    table = pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
    pq.write_table(table, out_dir / "samples.parquet")
    if gpu:
        t = np.arange(0, duration_s, 0.1)
        gpu_table = pa.table(
            {
                "t_epoch_ns": (START_EPOCH_NS + t * 1e9).astype(np.int64),
                "gpu": np.zeros(len(t), np.int32),
                "util": 0.6 + 0.3 * np.sin(t),
            }
        )
        pq.write_table(gpu_table, out_dir / GPU_TABLE)
    run = RunInfo(
        scenario="synthetic",
        target=target.replace("user:hunter2@", "").split("?")[0],
        api="anthropic",
        started_at="2026-11-29T10:45:01+00:00",
        start_monotonic_ns=1_000,
        start_epoch_ns=START_EPOCH_NS,
        duration_s=duration_s,
        scenario_config={
            "name": "synthetic",
            "description": f"{n} synthetic requests",
            "headers": {"x-api-key": "sk-ant-secret-123456789"},
        },
        offered_requests=n,
        offered_rate=n / duration_s,
        environment={"zqbench": "test", "reference_server": {"scheduler": "zero-queue"}},
        stages=(
            StageInfo("baseline", 0.0, duration_s * 0.4, n / duration_s),
            StageInfo("pulse", duration_s * 0.4, duration_s * 0.6, n / duration_s),
            StageInfo("recovery", duration_s * 0.6, duration_s, n / duration_s),
        ),
        telemetry={"gpu_density": 0.9} if gpu else {},
    )
    summary = summarize(table.to_pandas(), run=run, slos=list(slos))
    write_summary(summary, out_dir / "summary.json")
    return summary


# --- a run with a packet-loss impairment, every number known ------------------------------

LOSS_HOOK_RECORD = {
    "impairment": "packet-loss",
    "loss": 0.1,
    "stages": [1],
    "windows": [{"applied_s": 10.003, "removed_s": 20.004}],
    "dropped_packets": 1234,
}


def packet_loss_latencies_ms() -> tuple[np.ndarray, np.ndarray]:
    """300 requests, one every 100 ms; stages baseline 0-10 s, loss 10-20 s, recovery 20-30 s.

    baseline: 50 ms (P99 50 ms). loss: 90 at 60 ms, 8 at 250 ms and 2 reset (P99 of the 98
    successes: 250 ms, 5x; error share 2%). recovery: 15 at 200 ms, then 54 ms (within 10 %
    of 50 ms) from t = 21.5 s: recovered 1.5 s after the loss; the stage's P99 is 200 ms."""
    latency = np.array([50.0] * 100 + [60.0] * 100 + [200.0] * 15 + [54.0] * 85)
    latency[[105, 115, 125, 135, 145, 155, 165, 175]] = 250.0
    failed = np.zeros(300, bool)
    failed[[130, 170]] = True
    return latency, failed


def write_packet_loss_run(
    out_dir: Path, *, hook_record: dict[str, Any] | None = None, latency_ms=None, failed=None
) -> Summary:
    """A saved run of a packet-loss scenario, summarised as `zqbench run` does: the analysis
    stage's packet_loss_record from the samples and the hook's record, then summarize."""
    from zqbench.impair import packet_loss_record

    if latency_ms is None:
        latency_ms, failed = packet_loss_latencies_ms()
    n = len(latency_ms)
    failed = np.zeros(n, bool) if failed is None else failed
    t_send = np.arange(n, dtype=np.int64) * 100 * MS
    lat = np.where(failed, 5 * MS, (np.asarray(latency_ms) * MS).astype(np.int64))
    columns: dict[str, Any] = {
        "request_id": np.arange(n),
        "worker": np.zeros(n, np.int32),
        "stage": (t_send // (10_000 * MS)).astype(np.int32),
        "request_class": "default",
        "t_intended": t_send,
        "t_send": t_send,
        "t_headers": t_send + lat // 2,
        "t_first_token": np.where(failed, None, t_send + lat // 2),
        "t_last_token": np.where(failed, None, t_send + lat),
        "t_end": t_send + lat,
        "status": np.where(failed, 0, 200).astype(np.int32),
        "error": np.where(failed, "reset", None),
        "output_tokens": np.where(failed, 0, 8),
        "tokens_from_usage": np.ones(n, bool),
        "n_chunks": np.where(failed, 0, 8).astype(np.int32),
        "http_version": "1.1",
        "bytes_in": np.full(n, 500),
    }
    table = _table(columns, n)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out_dir / "samples.parquet")
    stages = (StageInfo("baseline", 0, 10, 10), StageInfo("loss", 10, 20, 10))
    stages += (StageInfo("recovery", 20, 30, 10),)
    record = LOSS_HOOK_RECORD if hook_record is None else hook_record
    samples = table.to_pandas()
    run = RunInfo(
        scenario="bundled:packet-loss",
        target="http://10.0.0.2:8000",
        api="anthropic",
        started_at="2026-11-29T10:45:01+00:00",
        start_monotonic_ns=1_000,
        start_epoch_ns=START_EPOCH_NS,
        duration_s=30.0,
        offered_requests=n,
        offered_rate=n / 30.0,
        environment={"zqbench": "test", "packet-loss": record},
        stages=stages,
        packet_loss=packet_loss_record(samples, stages, record),
    )
    summary = summarize(samples, run=run, slos=["errors:rate<0.01"])
    write_summary(summary, out_dir / "summary.json")
    return summary


def _table(columns: dict[str, Any], n: int) -> pa.Table:
    """The samples table; a column not given is null throughout."""
    arrays = []
    for field in ARROW_SCHEMA:
        value = columns.get(field.name)
        if value is None or isinstance(value, str):
            arrays.append(pa.array([value] * n, type=field.type))
        elif value.dtype == object:
            arrays.append(pa.array(list(value), type=field.type))
        else:
            arrays.append(pa.array(value, type=field.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
