"""The transport interface the load engine drives.

    TransportError            -> Sample.error
    ├── ConnectError          "connect"   could not open a connection
    ├── RequestTimeout        "timeout"   the per-request deadline passed
    ├── ConnectionReset       "reset"     the peer closed or reset mid-request
    ├── ProtocolViolation     "protocol"  bytes that are not valid HTTP
    ├── BodyTooLarge          "too_large" the body passed the configured cap
    └── Cancelled             "interrupted" the run ended (graceful stop or Ctrl-C) while it was
                                            in flight; its own timeout is "timeout"

A transport sends one request and reports what it receives to a `ResponseSink`
as it arrives, stamping each event with `time.perf_counter_ns()` at the moment
the bytes were read, so no parsing cost is charged to the server. The dialect's
stream parser is the sink; the transport never interprets the body. It hands the
sink at most `PoolLimits.slice_bytes` per event-loop iteration, so the load's
dispatcher, on the same loop, is never held up by a large response; a body past
`PoolLimits.max_body_bytes` fails as `too_large`, and what was timed until then
(send, headers, first bytes, bytes received) stays with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class TransportError(Exception):
    error_class = "transport"

    def __init_subclass__(cls, error_class: str) -> None:
        cls.error_class = error_class  # the class's Sample.error (the tree above)


class ConnectError(TransportError, error_class="connect"): ...


class RequestTimeout(TransportError, error_class="timeout"): ...


class ConnectionReset(TransportError, error_class="reset"): ...


class ProtocolViolation(TransportError, error_class="protocol"): ...


class BodyTooLarge(TransportError, error_class="too_large"): ...


class Cancelled(TransportError, error_class="interrupted"): ...


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str  # path and query, e.g. "/v1/messages"
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""


class ResponseSink(Protocol):
    """Receives a response as it arrives. Implemented by the dialects' stream parsers."""

    def on_headers(self, status: int, headers: Mapping[str, str], t_ns: int) -> None:
        """Status line and headers; header names lower-cased."""

    def on_data(self, data: bytes, t_ns: int) -> None:
        """A piece of the body exactly as read from the socket (any split)."""

    def on_end(self, t_ns: int) -> None:
        """The body is complete."""


@dataclass(slots=True)
class Exchange:
    """What the transport itself observed; the sink holds what the body meant."""

    t_send: int = 0  # first byte of the request handed to the connection
    t_end: int = 0  # last byte received, or the moment of failure
    bytes_in: int = 0
    http_version: str = "1.1"
    error: TransportError | None = None
    # Sent once more on a new connection: the server closed the kept-alive one under the
    # request before any byte of an answer (never the server's error; docs/design.md).
    resent: bool = False
    # ns the request waited for a free connection (HTTP/2: a free stream) before `t_send`:
    # every one the pool may open was busy. 0 when one was free at once.
    connection_wait: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def asks_to_close(request: HttpRequest) -> bool:
    """`Connection: close` sent: the connection is not reused, whatever the server answers."""
    return any(
        k.lower() == "connection" and v.strip().lower() == "close" for k, v in request.headers
    )


@dataclass(frozen=True, slots=True)
class PoolLimits:
    max_connections: int = 1024  # HTTP/1.1: concurrent requests need one connection each
    warm_connections: int = 8  # opened before the measured schedule starts
    max_body_bytes: int = 64 * 1024 * 1024
    connect_timeout_s: float = 5.0
    # Bytes of one socket read handed to the sink per event-loop callback: a bigger read is
    # handed on in slices, reading paused meanwhile, so the dispatcher's timers run between
    # them (a 256 KiB read of small SSE events costs the parser 2-13 ms in one piece).
    slice_bytes: int = 16 * 1024
    # False: every connection serves one request (a scenario's cold_connections), whatever
    # the server says about keep-alive.
    reuse_connections: bool = True


class Transport(Protocol):
    """One connection pool to one origin. Not thread-safe; one per event loop."""

    http_version: str

    async def open(self) -> None:
        """Resolve the target and open `warm_connections`; raise ConnectError if unreachable."""

    async def send(
        self, request: HttpRequest, sink: ResponseSink, timeout_s: float, ex: Exchange
    ) -> Exchange:
        """Send one request; never raises for per-request failures, they land in `Exchange.error`.

        `timeout_s` bounds the whole exchange (connect + send + full body). `ex` is filled and
        returned; the caller makes it, so that what was observed survives a cancellation."""

    async def close(self) -> None:
        """Close every connection."""
