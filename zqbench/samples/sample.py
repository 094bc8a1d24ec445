"""One `Sample` per request: the record every engine produces and every analysis reads.

The columns follow docs/design.md ("One Sample per request"). Client times are
integer nanoseconds on the monotonic clock relative to the run's start; server stamps
are the server's epoch seconds. The format does not depend on the engine that
produced it: the native asyncio engine, a Locust worker or a replayed file all write
the same columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa

SAMPLE_SCHEMA_VERSION = "zqbench.samples/1"


@dataclass(frozen=True, slots=True)
class Sample:
    request_id: int
    worker: int
    stage: int
    request_class: str
    t_intended: int | None  # open loop only; None in closed loop
    t_send: int  # first byte handed to the connection
    t_headers: int | None  # status line + headers received (TTFB)
    t_first_token: int | None  # first token event parsed
    t_last_token: int | None  # last token event parsed (TPOT runs from the first to it)
    t_end: int  # last byte, or the moment of failure
    status: int  # HTTP status; 0 for a transport failure
    error: str | None  # None on success; else timeout, connect, reset, protocol, bad_json, ...
    prompt_tokens: int | None
    output_tokens: int | None
    tokens_from_usage: bool  # True when the counts came from the server's usage
    itl_mean_ns: int | None
    itl_p99_ns: int | None
    itl_max_ns: int | None
    n_chunks: int  # token events received (docs/metrics.md, "Token events")
    srv_received: float | None  # X-Request-Received-Time, server epoch seconds
    srv_dispatch: float | None  # X-Request-Dispatch-Time
    srv_start: float | None  # X-Request-Start-Time
    srv_gpu_ms: float | None
    http_version: str  # "1.1" or "2"
    bytes_in: int
    retry_after_s: float | None  # Retry-After on a refusal, when given
    source_row: int | None = None  # the request source's row (a dataset's); None: synthetic
    cached_tokens: int | None = None  # prompt tokens from the server's prefix cache (usage)
    session: int | None = None  # the conversation it is a turn of (sessions executor)
    turn: int | None = None  # its turn in that conversation, from 0
    # Sent once more on a new connection: the server closed the reused kept-alive one under
    # it before any byte of an answer (zqbench.transport.base.Exchange.resent)
    resent: bool = False
    # ns it waited for a free connection (HTTP/2: stream) before `t_send`, every one the pool
    # may open being busy: the target's part of a late send, not the generator's. None: the
    # engine did not record it (a run saved before the column existed).
    connection_wait: int | None = None


SAMPLE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Sample))

ARROW_SCHEMA = pa.schema(
    [
        pa.field("request_id", pa.int64(), nullable=False),
        pa.field("worker", pa.int32(), nullable=False),
        pa.field("stage", pa.int32(), nullable=False),
        pa.field("request_class", pa.string(), nullable=False),
        pa.field("t_intended", pa.int64()),
        pa.field("t_send", pa.int64(), nullable=False),
        pa.field("t_headers", pa.int64()),
        pa.field("t_first_token", pa.int64()),
        pa.field("t_last_token", pa.int64()),
        pa.field("t_end", pa.int64(), nullable=False),
        pa.field("status", pa.int32(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("tokens_from_usage", pa.bool_(), nullable=False),
        pa.field("itl_mean_ns", pa.int64()),
        pa.field("itl_p99_ns", pa.int64()),
        pa.field("itl_max_ns", pa.int64()),
        pa.field("n_chunks", pa.int32(), nullable=False),
        pa.field("srv_received", pa.float64()),
        pa.field("srv_dispatch", pa.float64()),
        pa.field("srv_start", pa.float64()),
        pa.field("srv_gpu_ms", pa.float64()),
        pa.field("http_version", pa.string(), nullable=False),
        pa.field("bytes_in", pa.int64(), nullable=False),
        pa.field("retry_after_s", pa.float64()),
        pa.field("source_row", pa.int64()),
        pa.field("cached_tokens", pa.int64()),
        pa.field("session", pa.int64()),
        pa.field("turn", pa.int32()),
        # Nullable only so that a run saved before the column existed still reads (as False);
        # every run since writes True or False.
        pa.field("resent", pa.bool_()),
        pa.field("connection_wait", pa.int64()),
    ]
)

if tuple(ARROW_SCHEMA.names) != SAMPLE_FIELDS:  # the two declarations must not drift apart
    raise RuntimeError("ARROW_SCHEMA and Sample disagree")


def samples_to_table(samples: list[Sample]) -> pa.Table:
    """Columnar conversion, one pass per column (cheap for the 1 s flush batches)."""
    columns = {name: [getattr(s, name) for s in samples] for name in SAMPLE_FIELDS}
    return pa.Table.from_pydict(columns, schema=ARROW_SCHEMA)
