"""One `Sample` per request: the record every engine produces and every analysis reads.

The columns follow docs/design.md ("One Sample per request"). Client times are
integer nanoseconds on the monotonic clock relative to the run's start; server stamps
are the server's epoch seconds. The format does not depend on the engine that
produced it: the native asyncio engine, a Locust worker or a replayed file all write
the same columns.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa


class Sample(NamedTuple):
    """A tuple in the schema's order, so the recorder buffers it as it is: a frozen
    dataclass of these 37 fields cost 7.6 us to build and 1 us more to turn into the row the
    recorder converts, a NamedTuple 3.2 us in all, on a send path of about 150 (#45)."""

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
    # Reasoning models and tool calls (docs/metrics.md, "Token events"): the first text or
    # tool-call token event (`t_first_token` is the first of any kind, thinking included);
    # what the token events carried, bits 1 thinking, 2 text, 4 tool call, 8 thinking said
    # redacted, 16 thinking not shown; thinking tokens, the server's count where its usage
    # gave one (`reasoning_from_usage`), else the thinking token events where the thinking
    # was shown; the tool calls made.
    t_first_answer: int | None = None
    carried: int = 0
    reasoning_tokens: int | None = None
    reasoning_from_usage: bool = False
    tool_calls: int = 0


SAMPLE_FIELDS: tuple[str, ...] = Sample._fields

# samples.parquet's schema is read off Sample's annotations, so the two never drift apart.
_ARROW_TYPES = {"int": pa.int64(), "str": pa.string(), "bool": pa.bool_(), "float": pa.float64()}
_INT32 = frozenset({"worker", "stage", "status", "n_chunks", "turn", "carried", "tool_calls"})
# Nullable only so that a run saved before the column existed still reads (as False); every
# run since writes True or False.
_NULLABLE = frozenset({"resent", "carried", "reasoning_from_usage", "tool_calls"})


def _arrow_field(name: str, annotation: str) -> pa.Field:
    """A field's column: its type's, int32 for the small counts; nullable where it may be None."""
    kind, _, none = annotation.partition(" | ")
    arrow = pa.int32() if name in _INT32 else _ARROW_TYPES[kind]
    return pa.field(name, arrow, nullable=bool(none) or name in _NULLABLE)


def _annotation(name: str) -> str:
    """A field's annotation as written (NamedTuple keeps a string one as a ForwardRef)."""
    a = Sample.__annotations__[name]
    return str(getattr(a, "__forward_arg__", a))


ARROW_SCHEMA = pa.schema([_arrow_field(name, _annotation(name)) for name in SAMPLE_FIELDS])
