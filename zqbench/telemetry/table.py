"""The telemetry tables a run folder may hold, and their one writer.

telemetry.gpu.parquet: one row per GPU per reading. `t_epoch_ns`, `gpu`, `util` are what
the report's GPU plot reads (zqbench.outputs.render.load_gpu); the other columns are
null where the source does not give them (a Prometheus scrape has only utilization).

telemetry.prometheus.parquet: one row per scraped value (long format), from every scraper
of the run (its `url` column says which).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from zqbench.safe_files import write_via

GPU_TABLE = "telemetry.gpu.parquet"
PROMETHEUS_TABLE = "telemetry.prometheus.parquet"

GPU_SCHEMA = pa.schema(
    [
        pa.field("t_epoch_ns", pa.int64(), nullable=False),
        pa.field("gpu", pa.int32(), nullable=False),
        pa.field("util", pa.float64()),  # busy fraction 0..1
        pa.field("mem_util", pa.float64()),  # memory-controller busy fraction 0..1
        pa.field("mem_used_bytes", pa.int64()),
        pa.field("mem_total_bytes", pa.int64()),
        pa.field("sm_clock_mhz", pa.float64()),
        pa.field("power_w", pa.float64()),
        pa.field("temp_c", pa.float64()),
        pa.field("throttle_reasons", pa.uint64()),  # NVML clocks-event reason bitmask
        pa.field("source", pa.string(), nullable=False),  # "nvml" or "prometheus"
    ]
)

PROMETHEUS_SCHEMA = pa.schema(
    [
        pa.field("t_epoch_ns", pa.int64(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),  # canonical name, e.g. gpu_util
        pa.field("source_metric", pa.string(), nullable=False),  # as scraped
        pa.field("labels", pa.string(), nullable=False),  # JSON object, sorted keys
        pa.field("value", pa.float64()),
        pa.field("url", pa.string()),  # the /metrics scraped: several scrapers share the table
    ]
)


def write_table(path: Path, schema: pa.Schema, columns: Mapping[str, Sequence[object]]) -> Path:
    """Write the columns (missing ones as nulls) under `schema`, atomically."""
    n = len(next(iter(columns.values()))) if columns else 0
    arrays = [pa.array(columns.get(f.name, [None] * n), type=f.type) for f in schema]
    table = pa.Table.from_arrays(arrays, schema=schema)
    return write_via(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
