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

from zqbench.metrics.summarize import RunInfo, summarize
from zqbench.outputs.json_out import write_summary
from zqbench.records import ARROW_SCHEMA
from zqbench.stages import StageInfo
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
