"""One request of a conformance run and what came back: the evidence record checks judge.

`Recorder` is a `ResponseSink`: the control-plane client (sequential requests) and the load
transports (bursts) both stream an answer into it. It keeps the status, the headers, the
first BODY_CAP bytes, the SSE events with their arrival times and the client's timestamps,
and hands every piece to the dialect's parser too (for a generation), which decides what the
answer means: its text events, first token, usage, stop reason, in-stream error. Checks
judge exchanges; they never talk to the network themselves.

Times are `time.perf_counter_ns()`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from zqbench.dialects.base import EventHook, StreamParser
from zqbench.dialects.common import REFUSED_IN_STREAM, error_message, loads, reported_in_stream
from zqbench.dialects.sse import SSEEvent
from zqbench.redact import redact_headers
from zqbench.transport import base as transport

BODY_CAP = 256 * 1024  # bytes of a body kept for checks; the rest is counted, not stored
EXCERPT = 300  # bytes of a body shown as evidence

# `admitted`; `refused` (a non-2xx status); `refused_in_stream` (a refusal in disguise: a 2xx
# whose stream or body carried an overload error before any token, the dialect parser's error
# class of that name, which `zqbench run` counts alike); `failed` (no complete answer:
# timeout, connect, reset, protocol, ..., or another error inside a 2xx answer).
Admission = Literal["admitted", "refused", "refused_in_stream", "failed"]


@dataclass(frozen=True, slots=True)
class Request:
    http: transport.HttpRequest
    # The dialect's reader of the answer, for a generation (None: the answer is not parsed).
    parser: Callable[[EventHook], StreamParser] | None = None


@dataclass(slots=True)
class Evidence:
    method: str
    path: str
    status: int = 0  # 0: no response (see `error`)
    error: str | None = None  # transport failure: timeout, connect, reset, protocol, ...
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""  # first BODY_CAP bytes
    body_len: int = 0
    events: list[tuple[SSEEvent, int]] = field(default_factory=list)  # SSE, with arrival time
    http_version: str = ""
    t_send: int = 0
    t_headers: int | None = None
    t_first_byte: int | None = None  # first body byte
    t_end: int = 0
    parsed: StreamParser | None = None  # what the dialect made of a generation's answer

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    @property
    def sse_error(self) -> str | None:
        return None if self.parsed is None else self.parsed.sse_error

    @property
    def answer_error(self) -> str | None:
        """The dialect's error class of a generation's answer (None: none, or not parsed)."""
        return None if self.parsed is None else self.parsed.summary.error

    @property
    def admission(self) -> Admission:
        if self.status == 0 or self.error:
            return "failed"
        if not 200 <= self.status < 300:
            return "refused"
        error = self.answer_error
        if error == REFUSED_IN_STREAM:
            return "refused_in_stream"
        if reported_in_stream(error):
            return "failed"  # the server's own error, with no sign that it was full
        return "admitted"

    def error_words(self) -> str | None:
        """The server's own words for an error it reported inside a 2xx answer: the message
        of the first event (or the body) that carries an error object, cut to 200
        characters; None when none does."""
        for event, _ in self.events:
            try:
                obj = loads(event.data)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict) and (event.event == "error" or obj.get("error")):
                return error_message(obj)
        return None if self.is_sse else error_message(self.json())

    @property
    def ttft_ms(self) -> float | None:
        """Milliseconds from the send to the first text event, as the dialect reads it."""
        t = None if self.parsed is None else self.parsed.summary.t_first_token
        return None if t is None else (t - self.t_send) / 1e6

    @property
    def text_events(self) -> int:
        """Token events, as the dialect counts them (empty ones included; a non-streamed
        body with text is one)."""
        return 0 if self.parsed is None else self.parsed.summary.token_events

    @property
    def usage_output_tokens(self) -> int | None:
        """Output tokens the answer's usage reported (None when it reported none)."""
        summary = None if self.parsed is None else self.parsed.summary
        return summary.output_tokens if summary and summary.tokens_from_usage else None

    @property
    def stop_reason(self) -> str | None:
        return None if self.parsed is None else self.parsed.stop_reason

    def json(self) -> Any:
        """The body as JSON; None when it is not (or was cut at the cap)."""
        if self.body_len != len(self.body):
            return None
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    def ms(self, t: int | None) -> float | None:
        """A client timestamp as milliseconds after the send."""
        return None if t is None else round((t - self.t_send) / 1e6, 3)

    def evidence(self, *, body: bool = True) -> dict[str, Any]:
        """A short, redacted description for a report."""
        out: dict[str, Any] = {"request": f"{self.method} {self.path}", "status": self.status}
        if self.error:
            out["error"] = self.error
        if self.http_version:
            out["http_version"] = self.http_version
        out["headers"] = redact_headers(self.headers)
        out["ttfb_ms"] = self.ms(self.t_headers)
        out["total_ms"] = self.ms(self.t_end)
        if body and self.body_len:
            out["body"] = excerpt(self.body)
            out["body_bytes"] = self.body_len
        return out


def excerpt(data: bytes, limit: int = EXCERPT) -> str:
    """The first bytes of a body as text; bytes that are not UTF-8 show as escapes."""
    text = data[:limit].decode("utf-8", "backslashreplace")
    return text + f"... ({len(data) - limit} more bytes)" if len(data) > limit else text


class Recorder:
    """Fills one Evidence as the answer arrives (a `ResponseSink`), then `finish`es it with
    what the client saw (send and end times, the HTTP version, a transport failure)."""

    def __init__(self, req: Request) -> None:
        self.ex = Evidence(req.http.method, req.http.path)
        self.parser = req.parser(self._event) if req.parser is not None else None

    def on_headers(self, status: int, headers: Mapping[str, str], t_ns: int) -> None:
        self.ex.t_headers = t_ns
        self.ex.status = status
        self.ex.headers = dict(headers)
        if self.parser is not None:
            self.parser.on_headers(status, headers, t_ns)

    def on_data(self, data: bytes, t_ns: int) -> None:
        ex = self.ex
        if not data:
            return
        if ex.t_first_byte is None:
            ex.t_first_byte = t_ns
        if ex.body_len < BODY_CAP:
            ex.body += data[: BODY_CAP - ex.body_len]
        ex.body_len += len(data)
        if self.parser is not None:
            self.parser.on_data(data, t_ns)

    def on_end(self, t_ns: int) -> None:
        if self.parser is not None:
            self.parser.on_end(t_ns)

    def _event(self, event: SSEEvent, t_ns: int) -> None:
        self.ex.events.append((event, t_ns))

    def finish(self, sent: transport.Exchange) -> Evidence:
        ex = self.ex
        ex.t_send, ex.t_end = sent.t_send, sent.t_end
        if ex.status:
            ex.http_version = f"HTTP/{sent.http_version}"
        if sent.error is not None:
            ex.error = sent.error.error_class
        ex.parsed = self.parser
        return ex
