"""The conformance HTTP client: one request in, one `Exchange` (what came back, and when) out.

Conformance needs clarity, not throughput, so this is httpx (as `zqbench probe` is), and it
is the only module of zqbench.conform that imports it. Every exchange keeps the status, the
headers, the body (capped), the SSE events with their arrival times, and the client's
timestamps; checks judge exchanges, they never talk to the network themselves.

Times are `time.perf_counter_ns()`; `send_epoch` maps the send to the wall clock, for
evidence only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from zqbench.dialects.sse import SSEDecoder, SSEEvent
from zqbench.errors import TargetError
from zqbench.redact import redact_headers

BODY_CAP = 256 * 1024  # bytes of a body kept for checks; the rest is counted, not stored
EXCERPT = 300  # bytes of a body shown as evidence


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


@dataclass(slots=True)
class Exchange:
    method: str
    path: str
    status: int = 0  # 0: no response (see `error`)
    error: str | None = None  # transport failure: timeout, connect, reset, protocol
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""  # first BODY_CAP bytes
    body_len: int = 0
    events: list[tuple[SSEEvent, int]] = field(default_factory=list)  # SSE, with arrival time
    sse_error: str | None = None
    http_version: str = ""
    new_connection: bool = False
    send_epoch: float = 0.0
    t_send: int = 0
    t_headers: int | None = None
    t_first_byte: int | None = None  # first body byte
    t_end: int = 0

    @property
    def is_sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

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


def _error_class(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc).lower()
        return "reset" if "disconnected" in text or "incomplete" in text else "protocol"
    if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return "reset"
    return "transport"


class Recorder:
    """Fills one Exchange as the response arrives (shared by the sync and async paths)."""

    def __init__(self, req: Request) -> None:
        self.ex = Exchange(req.method, req.path)
        self.sse = SSEDecoder()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.started":
            self.ex.new_connection = True

    def start(self) -> None:
        self.ex.send_epoch = time.time()
        self.ex.t_send = time.perf_counter_ns()

    def head(self, status: int, http_version: str, headers: Iterable[tuple[str, str]]) -> None:
        ex = self.ex
        ex.t_headers = time.perf_counter_ns()
        ex.status = status
        ex.http_version = http_version
        for k, v in headers:  # a repeated header keeps its values, comma-joined (RFC 9110)
            k = k.lower()
            ex.headers[k] = f"{ex.headers[k]}, {v}" if k in ex.headers else v

    def chunk(self, data: bytes) -> None:
        ex = self.ex
        if not data:
            return
        t = time.perf_counter_ns()
        if ex.t_first_byte is None:
            ex.t_first_byte = t
        if ex.body_len < BODY_CAP:
            ex.body += data[: BODY_CAP - ex.body_len]
        ex.body_len += len(data)
        if ex.is_sse and self.sse.error is None:
            ex.events.extend((e, t) for e in self.sse.feed(data))
            ex.sse_error = self.sse.error

    def end(self, error: str | None = None) -> Exchange:
        self.ex.t_end = time.perf_counter_ns()
        if error and self.ex.error is None:
            self.ex.error = error
        return self.ex


def _build(client: httpx.Client, base: str, req: Request, rec: Recorder):
    trace = rec.trace
    return client.build_request(
        req.method,
        base + req.path,
        headers=list(req.headers),
        content=req.body or None,
        extensions={"trace": trace},
    )


def new_client(*, timeout_s: float, http2: bool = False, verify: bool = True) -> httpx.Client:
    return httpx.Client(
        http1=not http2,
        http2=http2,
        timeout=timeout_s,
        verify=verify,
        follow_redirects=False,
        trust_env=False,  # conformance must reach the target, not a proxy
    )


def send(client: httpx.Client, base: str, req: Request) -> Exchange:
    """One request, read to the end (or to the failure)."""
    rec = Recorder(req)
    request = _build(client, base, req, rec)
    rec.start()
    try:
        resp = client.send(request, stream=True)
        try:
            rec.head(resp.status_code, resp.http_version, resp.headers.multi_items())
            for data in resp.iter_raw():
                rec.chunk(data)
        finally:
            resp.close()
    except httpx.HTTPError as exc:
        return rec.end(_error_class(exc))
    return rec.end()


@contextmanager
def connection(base: str, *, timeout_s: float, http2: bool = False) -> Iterator[httpx.Client]:
    client = new_client(timeout_s=timeout_s, http2=http2)
    try:
        yield client
    finally:
        client.close()


def reachable(base: str, address: str, timeout_s: float) -> None:
    """Raise TargetError (one line naming the address) when nothing answers at `base`."""
    with connection(base, timeout_s=timeout_s) as client:
        ex = send(client, base, Request("GET", "/health"))
    if ex.error in ("connect", "timeout") or (ex.status == 0 and ex.error):
        raise TargetError(f"cannot reach the target at {address}: {ex.error}")
