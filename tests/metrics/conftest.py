"""A builder for samples DataFrames shaped exactly like samples.parquet read back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from zqbench.samples.sample import ARROW_SCHEMA

MS = 1_000_000  # ns


def build_samples(
    latency_ms: Sequence[float] | None = None,
    *,
    n: int | None = None,
    interval_ms: float = 10.0,
    **columns: Any,
) -> pd.DataFrame:
    """Successful open-loop requests sent every `interval_ms`, t_end = t_send + latency.

    Any column may be overridden with a scalar or a sequence; the frame goes through
    Arrow with ARROW_SCHEMA, so dtypes and nulls are those of a real samples.parquet.
    """
    if latency_ms is None:
        latency_ms = [10.0] * (n or 0)
    count = len(latency_ms)
    t_send = (np.arange(count) * interval_ms * MS).astype(np.int64)
    latency_ns = (np.asarray(latency_ms, dtype=np.float64) * MS).astype(np.int64)
    data: dict[str, Any] = {
        "request_id": np.arange(count),
        "worker": 0,
        "stage": 0,
        "request_class": "default",
        "t_intended": t_send,
        "t_send": t_send,
        "t_headers": t_send + latency_ns // 4,
        "t_first_token": t_send + latency_ns // 2,
        "t_end": t_send + latency_ns,
        "status": 200,
        "error": None,
        "prompt_tokens": 32,
        "output_tokens": 11,
        "tokens_from_usage": True,
        "itl_mean_ns": None,
        "itl_p99_ns": None,
        "itl_max_ns": None,
        "n_chunks": 11,
        "srv_received": None,
        "srv_dispatch": None,
        "srv_start": None,
        "srv_gpu_ms": None,
        "http_version": "1.1",
        "bytes_in": 1000,
        "retry_after_s": None,
        "source_row": None,
        "cached_tokens": None,
        "session": None,
        "turn": None,
        "resent": False,
        "connection_wait": 0,
        "t_first_answer": t_send + latency_ns // 2,  # a text answer: its first token
        "carried": 2,
        "reasoning_tokens": None,
        "reasoning_from_usage": False,
        "tool_calls": 0,
    }
    data.update(columns)
    data.setdefault("t_last_token", data["t_end"])  # the last token ends the stream
    arrays = []
    for schema_field in ARROW_SCHEMA:
        value = data[schema_field.name]
        if isinstance(value, np.ndarray) and value.dtype != object:
            arrays.append(pa.array(value, type=schema_field.type))
        elif isinstance(value, (np.ndarray, list, tuple, pd.Series)):
            arrays.append(pa.array(list(value), type=schema_field.type))
        else:
            arrays.append(pa.array([value] * count, type=schema_field.type))
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA).to_pandas()


@pytest.fixture
def make_samples() -> Callable[..., pd.DataFrame]:
    return build_samples
