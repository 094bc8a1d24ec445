"""The values both dialects read the same way: headers (timing stamps, Retry-After), JSON
numbers and token counts, error objects. The parser skeleton that uses them is
`zqbench.dialects.parser`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from zqbench.dialects.base import ResponseSummary

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024  # a non-streamed body larger than this is "too_large"
ERROR_BODY_CAP = 64 * 1024  # of a non-2xx body, kept only to describe the error
_DETAIL_CHARS = 200


# ---------------------------------------------------------------------- header values
# A server's epoch stamp past this (the year 5138) is not a clock: `1e308` would make every
# derived duration infinite. Such a stamp reads as absent.
MAX_EPOCH_S = 1e11


def _epoch(x: float | None) -> float | None:
    return x if x is not None and x < MAX_EPOCH_S else None


def parse_epoch(value: str | None) -> float | None:
    """An epoch-seconds header (`1764400000.123456`); None if absent, not a finite number
    >= 0, or past MAX_EPOCH_S."""
    return None if value is None else _epoch(_nonneg_float(value))


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait, from `retry-after-ms` (preferred, as the SDKs do) or `retry-after`.

    `retry-after` is seconds (floats accepted) or an HTTP-date, turned into seconds from
    `now` (epoch seconds; default the current time) and floored at 0. Garbage gives None.
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        x = _nonneg_float(ms)
        if x is not None:
            return x / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    x = _nonneg_float(value)
    if x is not None:
        return x
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:  # some Python versions return None instead of raising
        return None
    if when.tzinfo is None:  # "-0000": the RFC says UTC
        when = when.replace(tzinfo=timezone.utc)
    if now is None:
        now = time.time()
    return max(0.0, when.timestamp() - now)


def _nonneg_float(value: str) -> float | None:
    """A header value as a finite number >= 0, else None."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(x) or x < 0:
        return None
    return x


def read_headers(summary: ResponseSummary, headers: Mapping[str, str]) -> None:
    summary.srv_received = parse_epoch(headers.get("x-request-received-time"))
    summary.srv_dispatch = parse_epoch(headers.get("x-request-dispatch-time"))
    summary.srv_start = parse_epoch(headers.get("x-request-start-time"))
    summary.retry_after_s = parse_retry_after(headers)


# ---------------------------------------------------------------------- body values
def loads(text: str | bytes) -> Any:
    """`json.loads` for one event's data or a body, by orjson: 2-3x faster on a token's
    chunk, the largest cost of a stream after the socket (docs/performance.md).

    What orjson refuses and Python's json accepts (NaN and Infinity, a lone surrogate
    escape, a number past a double) is read by json, so nothing json reads is lost; an
    integer past 64 bits comes back from orjson as a float, which `count` takes for the
    integer it was. Raises ValueError (or RecursionError) for anything json.loads rejects."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x >= 0 else None


def count(x: Any) -> int | None:
    """A token count from JSON: a non-negative int (not a bool), else None. A whole float
    past 2^64 is an integer orjson could not hold as one (`loads`): far out of any column's
    range, it is kept as that integer, so the sample says out_of_range as it would."""
    if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
        return x
    if type(x) is float and x >= 2.0**64 and x.is_integer():
        return int(x)
    return None


def apply_zq_timing(summary: ResponseSummary, obj: Any) -> None:
    """`zq_timing: {"received","dispatch","start","gpu_ms"}` from the final event or body.

    GPU time only travels here. The three stamps fill in only where the headers were absent
    (the headers are the contract; the body is the fallback)."""
    if not isinstance(obj, dict):
        return
    gpu = _number(obj.get("gpu_ms"))
    if gpu is not None:
        summary.srv_gpu_ms = gpu
    if summary.srv_received is None:
        summary.srv_received = _epoch(_number(obj.get("received")))
    if summary.srv_dispatch is None:
        summary.srv_dispatch = _epoch(_number(obj.get("dispatch")))
    if summary.srv_start is None:
        summary.srv_start = _epoch(_number(obj.get("start")))


_PLAIN_TYPE = re.compile(r"[a-z0-9_]{1,40}")

# A refusal in disguise: a 2xx answer whose stream (or body) carries, before any token, an
# error that says the server is full. The parser's error class for it, which the outcome
# kernel counts as a refusal (zqbench.metrics.classify).
REFUSED_IN_STREAM = "refused_in_stream"
OVERLOAD_CODES = frozenset({429, 503, 529})  # also the refusal statuses of the outcome kernel
OVERLOAD_TYPES = frozenset({"overloaded_error", "rate_limit_error"})
_CODE_KEYS = ("code", "status", "status_code")
# vLLM's Anthropic route (0.32) converts its OpenAI route's chunks; the overload chunk
# `{"error": {..., "code": 503}}` fails that conversion, and what reaches the client is an
# `internal_error` whose message is pydantic's validation error, quoting the chunk it could
# not convert: `input_value={'error': {'message': 'Th...am': None, 'code': 503}}`. The quoted
# error object with an overload code is the server's own sign; a message that merely
# mentions a number is not.
_QUOTED_OVERLOAD = re.compile(
    r"""\{['"]error['"]: ?\{[^\n{}]*['"]code['"]: ?['"]?(?:429|503|529)['"]?\}"""
)
_QUOTED_SCAN = 4096  # characters of a message searched: the quote sits near its start


def _overload_code(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None
    return isinstance(value, int) and value in OVERLOAD_CODES


def overload_sign(err: Any) -> bool:
    """True when an error object says the server is full: 429, 503 or 529 (an int or a
    numeric string) in `code`, `status` or `status_code`; a type `overloaded_error` or
    `rate_limit_error`; or a message quoting an error object with such a code (vLLM's
    Anthropic route, above)."""
    if not isinstance(err, dict):
        return False
    if any(_overload_code(err.get(key)) for key in _CODE_KEYS):
        return True
    if err.get("type") in OVERLOAD_TYPES:
        return True
    message = err.get("message")
    return isinstance(message, str) and bool(_QUOTED_OVERLOAD.search(message[:_QUOTED_SCAN]))


def stream_error_class(err: Any, *, before_token: bool = False) -> str:
    """The class of an error reported inside a 2xx response: `refused_in_stream` when it
    came before any token event and says the server is full (`overload_sign`), else
    `stream_<type>` for an error object with a plain type, else `stream_error`."""
    if before_token and overload_sign(err):
        return REFUSED_IN_STREAM
    if isinstance(err, dict):
        kind = err.get("type")
        if isinstance(kind, str) and kind != "error" and _PLAIN_TYPE.fullmatch(kind):
            return f"stream_{kind}"
    return "stream_error"


def reported_in_stream(error: str | None) -> bool:
    """True for the error classes of an error the server reported inside a 2xx response."""
    return error is not None and (error == REFUSED_IN_STREAM or error.startswith("stream_"))


def error_object_problem(obj: Any) -> str | None:
    """Why a non-2xx body's JSON is not `{"error": {"type": str, "message": str, ...}}`, the
    error object both APIs send; None when it is."""
    if not isinstance(obj, dict):
        return "the body is not a JSON object"
    err = obj.get("error")
    if not isinstance(err, dict):
        return "no `error` object"
    if not isinstance(err.get("message"), str):
        return "error.message is not a string"
    if not isinstance(err.get("type"), str):
        return "error.type is not a string"
    return None


def error_message(obj: Any) -> str | None:
    """The server's own words, the `message` of an Anthropic, OpenAI or flat vLLM error
    object (or a bare error string), shortened; None when `obj` holds none."""
    if isinstance(obj, dict) and "error" in obj:
        obj = obj["error"]
    if isinstance(obj, dict):
        obj = obj.get("message")
    return obj[:_DETAIL_CHARS] if isinstance(obj, str) and obj.strip() else None


def estimate_tokens(chars: int) -> int:
    """A client-side output-token estimate: about 4 characters a token, at least 1."""
    return max(1, (chars + 2) // 4) if chars > 0 else 0
