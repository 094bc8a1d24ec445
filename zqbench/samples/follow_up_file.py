"""The Retry-After follow-ups' tries on disk, kept apart from the samples.

Each worker writes its tries as JSON lines (`retry_after.w<N>.jsonl`, zqbench.engines.
follow_up) when it ends; the analysis merges them into retry_after.parquet, one row per try
(TRY_COLUMNS), and removes the lines. No figure but summary.json's `retry_after_follow_up`
reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from zqbench.safe_files import open_new, write_via

GLOB = "retry_after.w*.jsonl"
PARQUET_NAME = "retry_after.parquet"
TRY_SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),  # the refused request's, as in samples.parquet
        ("worker", pa.int32()),
        ("attempt", pa.int32()),  # 1: the try when the refusal's Retry-After said
        ("t_refused", pa.int64()),  # ns since the run's start: the refusal's end
        ("t_due", pa.int64()),  # when the Retry-After it follows said to come back
        ("t_send", pa.int64()),  # null: never sent (the run ended first)
        ("t_end", pa.int64()),
        ("status", pa.int32()),  # 0: no HTTP answer
        ("error", pa.string()),  # the error class; ended_with_run / stopped: cut by the run
        ("retry_after_s", pa.float64()),  # this answer's Retry-After, if any
    ]
)


def worker_path(out_dir: Path, worker: int) -> Path:
    return out_dir / f"retry_after.w{worker}.jsonl"


def write_lines(path: Path, records: list[dict[str, object]]) -> None:
    with open_new(path) as f:
        for record in records:
            f.write((json.dumps(record) + "\n").encode())


def collect(out_dir: Path) -> pd.DataFrame | None:
    """Every worker's tries as one table, written to retry_after.parquet; None: no tries."""
    files = sorted(p for p in out_dir.glob(GLOB) if p.is_file())
    if not files:
        return None
    rows = [
        json.loads(line)
        for path in files
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    table = pa.Table.from_pylist(rows, schema=TRY_SCHEMA)
    write_via(out_dir / PARQUET_NAME, lambda tmp: pq.write_table(table, tmp))
    for path in files:
        path.unlink()
    return table.to_pandas()
