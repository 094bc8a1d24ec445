"""What both dialects share: header parsing, secrets, and the response-parser skeleton.

`ResponseParser` implements the `ResponseSink` side once (status, timing headers,
Retry-After, error bodies, body caps, SSE framing, end-of-stream checks); a dialect
subclass only says what one SSE event or one JSON body means.

Error classes a parser can leave in `summary.error` (first one wins):

    http_<code>        the status was not 2xx (the error JSON, if any, goes to `error_detail`)
    bad_sse            the event stream was not valid UTF-8, or a line/event passed the cap
    bad_json           an event's data, or a non-streamed body, was not JSON of the right shape
    stream_error       an error reported inside a 2xx response (`event: error`, an `error` key);
    stream_<type>        with the error's type when it has a plain one: stream_overloaded_error
    incomplete_stream  the body ended before the stream's end marker
    too_large          a non-streamed body passed `max_body_bytes` (memory stays bounded)
    parse_error        a bug in the parser itself; it is caught so the run goes on

Transport failures (timeout, reset, ...) are the transport's to report; the engine prefers
them over whatever the parser saw.
"""

from __future__ import annotations

import abc
import json
import math
import re
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from zqbench.dialects.base import ResponseSummary
from zqbench.dialects.sse import SSEDecoder, SSEEvent
from zqbench.redact import secret_headers

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024  # a non-streamed body larger than this is "too_large"
ERROR_BODY_CAP = 64 * 1024  # of a non-2xx body, kept only to describe the error
_DETAIL_CHARS = 200


def header_tuple(
    base: list[tuple[str, str]], extra: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """The dialect's headers, then the user's extra ones (credentials among them redacted)."""
    return (*base, *secret_headers(extra))


# ---------------------------------------------------------------------- header values
def parse_epoch(value: str | None) -> float | None:
    """An epoch-seconds header (`1764400000.123456`); None if absent or not a finite number."""
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(x) or x < 0:
        return None
    return x


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
        from datetime import timezone

        when = when.replace(tzinfo=timezone.utc)
    if now is None:
        now = time.time()
    return max(0.0, when.timestamp() - now)


def _nonneg_float(value: str) -> float | None:
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
_raw_decode = json.JSONDecoder().raw_decode


def loads(text: str) -> Any:
    """`json.loads` for one event's data, minus two Python-level wrapper calls per event.

    Raises ValueError (or RecursionError) for anything json.loads rejects."""
    try:
        obj, end = _raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace is legal; real garbage raises here
    if end != len(text) and not text[end:].isspace():
        raise ValueError("extra data after the JSON value")
    return obj


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) and x >= 0 else None


def count(x: Any) -> int | None:
    """A token count from JSON: a non-negative int (not a bool), else None."""
    if isinstance(x, int) and not isinstance(x, bool) and x >= 0:
        return x
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
        summary.srv_received = _number(obj.get("received"))
    if summary.srv_dispatch is None:
        summary.srv_dispatch = _number(obj.get("dispatch"))
    if summary.srv_start is None:
        summary.srv_start = _number(obj.get("start"))


_PLAIN_TYPE = re.compile(r"[a-z0-9_]{1,40}")


def stream_error_class(err: Any) -> str:
    """`stream_<type>` for an error object with a plain type, else `stream_error`."""
    if isinstance(err, dict):
        kind = err.get("type")
        if isinstance(kind, str) and kind != "error" and _PLAIN_TYPE.fullmatch(kind):
            return f"stream_{kind}"
    return "stream_error"


def describe_error(obj: Any) -> str | None:
    """`type: message` from an Anthropic, OpenAI or flat vLLM error object, shortened."""
    if isinstance(obj, dict) and "error" in obj:
        obj = obj["error"]
    if isinstance(obj, str):
        return obj[:_DETAIL_CHARS]
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    message = obj.get("message")
    parts = [str(p) for p in (kind, message) if isinstance(p, (str, int)) and p != ""]
    return ": ".join(parts)[:_DETAIL_CHARS] if parts else None


def describe_error_body(body: bytes) -> str | None:
    """The error a non-2xx body describes; None for an empty or non-JSON body."""
    if not body:
        return None
    try:
        obj = json.loads(body)
    except Exception:  # garbage, bad UTF-8, absurd nesting: the status already says enough
        return None
    return describe_error(obj)


def estimate_tokens(chars: int) -> int:
    """A client-side output-token estimate: about 4 characters a token, at least 1."""
    return max(1, (chars + 2) // 4) if chars > 0 else 0


# ---------------------------------------------------------------------- the parser
class ResponseParser(abc.ABC):
    """One response: a `StreamParser` whose dialect-specific part is `_event` / `_body`.

    For a streamed request the body is decoded as SSE and only the event being read is kept;
    for a non-streamed one the body is kept up to `max_body_bytes` and parsed at the end.
    TTFT of a non-streamed response is the arrival of the first body byte: nothing earlier
    tells the client that generation produced anything.
    """

    __slots__ = (
        "_body",
        "_body_len",
        "_cap",
        "_done",
        "_ended",
        "_ok",
        "_sse",
        "_stopped",
        "error_detail",
        "stop_reason",
        "stream",
        "summary",
    )

    def __init__(
        self,
        stream: bool,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.summary = ResponseSummary()
        self.stream = stream
        self.error_detail: str | None = None  # the server's own words for an error, shortened
        self.stop_reason: str | None = None  # stop_reason / finish_reason, when given
        self._cap = max_body_bytes
        self._ok = False  # 2xx
        self._sse: SSEDecoder | None = SSEDecoder() if stream else None
        self._body: list[bytes] = []
        self._body_len = 0
        self._done = False  # the stream's end marker was seen
        self._stopped = False  # done or failed: later stream bytes are ignored
        self._ended = False

    # -------------------------------------------------------------- ResponseSink
    def on_headers(self, status: int, headers: Mapping[str, str], t_ns: int) -> None:
        try:
            s = self.summary
            s.status = status
            s.t_headers = t_ns
            read_headers(s, headers)
            self._ok = 200 <= status < 300
            if not self._ok:
                s.error = f"http_{status}"
        except Exception:
            self._fail("parse_error")

    def on_data(self, data: bytes, t_ns: int) -> None:
        try:
            if not data:
                return
            if not self._ok:
                self._keep(data, ERROR_BODY_CAP)
                return
            sse = self._sse
            if sse is None:
                if self.summary.t_first_token is None:
                    self.summary.t_first_token = t_ns
                if not self._keep(data, self._cap):
                    self._fail("too_large")
                return
            if self._stopped:
                return
            for event in sse.feed(data):
                self._event(event, t_ns, False)
                if self._stopped:
                    return
            if sse.error is not None:
                self._fail(sse.error)
        except Exception:
            self._fail("parse_error")

    def on_end(self, t_ns: int) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            s = self.summary
            if not self._ok:
                self.error_detail = describe_error_body(b"".join(self._body))
                self._body = []
            elif self._sse is not None:
                if not self._stopped:
                    # Lenient about a final event whose closing blank line never came; a
                    # half event that is not JSON then reads as a cut stream, not bad JSON.
                    pending = self._sse.finish()
                    if pending is not None:
                        self._event(pending, t_ns, True)
                if not self._done:
                    self._fail("incomplete_stream")
            elif not self._stopped:
                body = b"".join(self._body)
                self._body = []
                self._parse_body(body, t_ns)
            self._finish_tokens(s)
        except Exception:
            self._fail("parse_error")

    # -------------------------------------------------------------- for subclasses
    @abc.abstractmethod
    def _event(self, event: SSEEvent, t_ns: int, at_eof: bool) -> None:
        """One SSE event of a streamed response."""

    @abc.abstractmethod
    def _body_json(self, obj: dict[str, Any], t_ns: int) -> None:
        """The parsed JSON body of a non-streamed response."""

    def _fail(self, error: str) -> None:
        """Record the first error and stop reading the stream."""
        self._stopped = True
        if self.summary.error is None:
            self.summary.error = error

    def _finish_stream(self) -> None:
        self._done = True
        self._stopped = True

    def _bad_data(self, at_eof: bool) -> None:
        # A half event at the very end is a cut stream, not a server emitting garbage.
        self._fail("incomplete_stream" if at_eof else "bad_json")

    def _token(self, text: str, t_ns: int) -> None:
        """One content chunk: its arrival time and its characters."""
        s = self.summary
        if s.t_first_token is None:
            s.t_first_token = t_ns
        s.token_times.append(t_ns)
        s.text_chars += len(text)

    def _body_text(self, text: str) -> None:
        """The generated text of a non-streamed body: one chunk, at the first body byte."""
        s = self.summary
        if text and s.t_first_token is not None:
            s.token_times.append(s.t_first_token)
        s.text_chars += len(text)

    # -------------------------------------------------------------- internals
    def _keep(self, data: bytes, cap: int) -> bool:
        if self._stopped:
            return True
        self._body_len += len(data)
        if self._body_len > cap:
            self._body = []
            return False
        self._body.append(data)
        return True

    def _parse_body(self, body: bytes, t_ns: int) -> None:
        try:
            obj = json.loads(body)
        except Exception:  # not JSON, not UTF-8, nested too deep
            self._fail("bad_json")
            return
        if not isinstance(obj, dict):
            self._fail("bad_json")
            return
        apply_zq_timing(self.summary, obj.get("zq_timing"))
        self._body_json(obj, t_ns)

    def _finish_tokens(self, s: ResponseSummary) -> None:
        # Without usage, estimate from the text (the engine falls back to the request's
        # own prompt estimate for prompt_tokens).
        if s.output_tokens is None:
            s.tokens_from_usage = False
            if s.text_chars > 0:
                s.output_tokens = estimate_tokens(s.text_chars)
            elif s.error is None:
                s.output_tokens = 0
