"""The control-plane HTTP client: every request zqbench sends that is not a measured one.

Health checks, reachability, the model list, calibration probes, Prometheus scrapes and
`zqbench conform`'s sequential requests all go through here, so they behave alike:

- TLS is verified against the system's trust store, as the load transports verify it
  (`zqbench.transport.origin.client_ssl_context`); `insecure=True` accepts any certificate;
- one deadline bounds each call, from connecting to the last body byte: a server that drips
  bytes cannot hold a call past it (httpx's own timeouts restart at every read, so a
  watchdog shuts the connection's socket down when the deadline passes);
- a body past `max_body_bytes` stops the call (`too_large`), so memory stays bounded;
- no proxy from the environment (`trust_env=False`), no redirect followed, no compression
  asked for (a sink sees the bytes the server meant);
- error messages name the URL without its credentials (`zqbench.redact`).

httpx's exceptions are translated once, in `_translate`, into zqbench's transport errors
(`zqbench.transport.base`: connect, timeout, reset, protocol, too_large), so a control call
fails with the same classes as a measured request. The small functions raise them as:

    TargetError
    └── ControlError   .error_class: connect, timeout, reset, protocol, too_large,
                       http_<status> (a non-2xx answer) or bad_json; .status: the
                       non-2xx answer's status, else 0

Calls block (httpx's synchronous client: an answer that arrives while the request body is
still being sent, a 413 before a 32 MB upload ends, is still read). This module is the only
one of zqbench, besides the measuring tool transport/httpx_timed.py, that imports httpx.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping
from time import perf_counter_ns
from typing import Any

import h2.exceptions
import httpx

from zqbench.errors import TargetError
from zqbench.redact import redact_text, redact_url
from zqbench.transport.base import (
    BodyTooLarge,
    ConnectError,
    ConnectionReset,
    Exchange,
    HttpRequest,
    ProtocolViolation,
    RequestTimeout,
    ResponseSink,
    TransportError,
)
from zqbench.transport.origin import client_ssl_context, parse_base_url

DEFAULT_TIMEOUT_S = 10.0
MAX_BODY_BYTES = 16 * 1024 * 1024
# A sink gets the bytes on the wire: asking for no compression keeps them the server's words.
_DEFAULT_HEADERS = {"accept-encoding": "identity", "user-agent": "zqbench"}
_CONNECTED = ("connection.connect_tcp.complete", "connection.start_tls.complete")

Headers = Iterable[tuple[str, str]]


class ControlError(TargetError):
    """A control-plane call failed; the message names the call and the URL, never a secret."""

    def __init__(self, method: str, url: str, reason: str, error_class: str, status: int = 0):
        super().__init__(f"{method} {redact_url(url)}: {redact_text(reason)}")
        self.error_class = error_class
        self.status = status


@functools.cache
def _ssl_context(insecure: bool, http2: bool) -> ssl.SSLContext:
    # Loading the trust store costs tens of ms: once per process and setting, not per call.
    return client_ssl_context(insecure, ["h2"] if http2 else ["http/1.1"])


def _reason(exc: BaseException) -> str:
    """The root cause in a few words: `Connection refused`, not httpx's generic wrapper."""
    seen: BaseException | None = exc
    for _ in range(8):  # the cause chain is short; the bound only guards against a cycle
        if seen is None:
            break
        if isinstance(seen, ssl.SSLError):
            return str(seen).splitlines()[0]
        if isinstance(seen, OSError) and seen.errno:
            return os.strerror(seen.errno)
        seen = seen.__cause__ or seen.__context__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text or type(exc).__name__


def _translate(exc: httpx.HTTPError) -> TransportError:
    """httpx's exception as the transport error of the same meaning."""
    reason = _reason(exc)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return ConnectError(reason)
    if isinstance(exc, httpx.TimeoutException):
        return RequestTimeout(reason)
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc).lower()
        if "disconnected" in text or "incomplete" in text or "closed" in text:
            return ConnectionReset(reason)
        return ProtocolViolation(reason)
    if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return ConnectionReset(reason)
    if isinstance(exc, httpx.ProtocolError | httpx.UnsupportedProtocol):
        return ProtocolViolation(reason)
    return TransportError(reason)


# What httpcore lets through on a malformed HTTP/2 answer: int() of a `:status` that is no
# number (ValueError), and h2's own errors (a PUSH_PROMISE, which zqbench never allows). The
# target's fault: a protocol violation, never an internal error.
_MALFORMED = (ValueError, h2.exceptions.H2Error)


def _malformed(exc: Exception) -> ProtocolViolation:
    return ProtocolViolation(f"malformed answer: {_reason(exc)}")


def _raw(resp: httpx.Response) -> Iterator[bytes]:
    """The body's bytes as they arrive; a malformed frame on the way is the target's."""
    try:
        yield from resp.iter_raw()
    except _MALFORMED as exc:
        raise _malformed(exc) from None


def _joined(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case names; a repeated header keeps its values, comma-joined (RFC 9110)."""
    out: dict[str, str] = {}
    for k, v in items:
        k = k.lower()
        out[k] = f"{out[k]}, {v}" if k in out else v
    return out


class Answer:
    """A sink keeping the status and the first `keep` bytes of the body, and passing
    everything on to `parser`, if any (a dialect's, which reads the answer too)."""

    def __init__(self, parser: ResponseSink | None = None, *, keep: int = MAX_BODY_BYTES) -> None:
        self.parser = parser
        self.status = 0
        self.body = bytearray()
        self.keep = keep  # bytes of the body kept

    def on_headers(self, status: int, headers: Mapping[str, str], t_ns: int) -> None:
        self.status = status
        if self.parser is not None:
            self.parser.on_headers(status, headers, t_ns)

    def on_data(self, data: bytes, t_ns: int) -> None:
        room = self.keep - len(self.body)
        if room > 0:
            self.body += data[:room]
        if self.parser is not None:
            self.parser.on_data(data, t_ns)

    def on_end(self, t_ns: int) -> None:
        if self.parser is not None:
            self.parser.on_end(t_ns)


class ControlClient:
    """Sequential control-plane calls on one keep-alive connection. Not thread-safe.

    `timeout_s` is each call's deadline unless the call names its own."""

    def __init__(
        self,
        *,
        insecure: bool = False,
        http2: bool = False,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self.connections_opened = 0  # TCP connections this client opened so far
        self._http = httpx.Client(
            http1=not http2,
            http2=http2,
            verify=_ssl_context(insecure, http2),
            follow_redirects=False,
            trust_env=False,  # reach the target itself, never a proxy from the environment
            headers=_DEFAULT_HEADERS,
            # One connection at a time: the one whose socket the watchdog cuts.
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        )
        self._socket: socket.socket | None = None  # the connection's socket, once open
        self._expired = threading.Event()  # the running call's deadline has passed

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ streaming
    def send(
        self,
        base_url: str,
        request: HttpRequest,
        sink: ResponseSink,
        *,
        timeout_s: float | None = None,
    ) -> Exchange:
        """Send `request` to `base_url` + its path; report the answer to `sink` as it arrives.

        Like a load transport's `send`, it never raises for a failed call: the failure is in
        `Exchange.error`, and the sink has had whatever arrived before it (no `on_end`)."""
        deadline = self.timeout_s if timeout_s is None else timeout_s
        ex = Exchange(http_version="")
        self._expired.clear()
        watchdog = threading.Timer(deadline, self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            self._send(base_url + request.path, request, sink, ex, deadline)
        except httpx.HTTPError as exc:
            late = self._expired.is_set() or isinstance(exc, httpx.TimeoutException)
            ex.error = (
                RequestTimeout(f"no complete answer within {deadline:g} s")
                if late
                else _translate(exc)
            )
        except TransportError as exc:
            ex.error = exc
        finally:
            watchdog.cancel()
            watchdog.join()  # it never touches the connection after this call has returned
        if not ex.t_end:
            ex.t_end = perf_counter_ns()
        return ex

    def _send(
        self, url: str, request: HttpRequest, sink: ResponseSink, ex: Exchange, deadline: float
    ) -> None:
        req = self._http.build_request(
            request.method,
            url,
            headers=list(request.headers),
            content=request.body or None,
            timeout=deadline,  # each connect, write or read; the watchdog bounds their sum
            extensions={"trace": self._trace},
        )
        ex.t_send = perf_counter_ns()
        try:
            resp = self._http.send(req, stream=True)
        except _MALFORMED as exc:
            raise _malformed(exc) from None
        try:
            ex.http_version = resp.http_version.removeprefix("HTTP/")
            sink.on_headers(
                resp.status_code, _joined(resp.headers.multi_items()), perf_counter_ns()
            )
            for data in _raw(resp):
                ex.bytes_in += len(data)
                if ex.bytes_in > self.max_body_bytes:
                    raise BodyTooLarge(f"the body passed the {self.max_body_bytes}-byte cap")
                sink.on_data(data, perf_counter_ns())
        finally:
            resp.close()
        ex.t_end = perf_counter_ns()
        sink.on_end(ex.t_end)

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in _CONNECTED:
            return
        if event == _CONNECTED[0]:
            self.connections_opened += 1
        self._socket = info["return_value"].get_extra_info("socket")
        if self._expired.is_set():  # the deadline passed while connecting
            self._expire()

    def _expire(self) -> None:
        """The deadline passed (the watchdog's thread): cut the connection, which ends any
        read or write the call is blocked in."""
        self._expired.set()
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, also for TLS: SSLSocket's would drop its TLS
                # state under the reading thread's feet.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    # ------------------------------------------------------------ whole answers
    def call(self, method: str, url: str, *, headers: Headers = (), body: bytes = b"") -> bytes:
        """The body of a 2xx answer; ControlError for a failure or any other status."""
        sink = Answer(keep=self.max_body_bytes)  # a longer body fails the call (too_large)
        ex = self.send(url, HttpRequest(method, "", tuple(headers), body), sink)
        if ex.error is not None:
            raise ControlError(method, url, str(ex.error), ex.error.error_class)
        if not 200 <= sink.status < 300:
            raise ControlError(
                method, url, f"HTTP {sink.status}", f"http_{sink.status}", sink.status
            )
        return bytes(sink.body)

    def get_text(self, url: str, *, headers: Headers = ()) -> str:
        return self.call("GET", url, headers=headers).decode("utf-8", "replace")

    def get_json(self, url: str, *, headers: Headers = ()) -> Any:
        return _json("GET", url, self.call("GET", url, headers=headers))

    def post_json(self, url: str, body: bytes, *, headers: Headers = ()) -> Any:
        """POST `body` (JSON, already encoded) and return the JSON answer."""
        return _json("POST", url, self.call("POST", url, headers=headers, body=body))


def _json(method: str, url: str, body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise ControlError(method, url, "the answer is not JSON", "bad_json") from None


# ---------------------------------------------------------------- one-off calls
def get_text(
    url: str, *, headers: Headers = (), insecure: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    with ControlClient(insecure=insecure, timeout_s=timeout_s) as client:
        return client.get_text(url, headers=headers)


def get_json(
    url: str, *, headers: Headers = (), insecure: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    with ControlClient(insecure=insecure, timeout_s=timeout_s) as client:
        return client.get_json(url, headers=headers)


def check_reachable(
    base_url: str, *, insecure: bool = False, timeout_s: float = 5.0, http2: bool = False
) -> None:
    """TargetError `cannot reach HOST:PORT: <reason>` unless the target answers HTTP.

    Any answer to `GET /health` counts, a 404 too: the question is only whether an HTTP
    server is there (and, for https, whether its certificate verifies)."""
    origin = parse_base_url(base_url)
    with ControlClient(insecure=insecure, timeout_s=timeout_s, http2=http2) as client:
        ex = client.send(base_url, HttpRequest("GET", "/health", ()), Answer(keep=0))
    if isinstance(ex.error, RequestTimeout):
        raise TargetError(f"cannot reach {origin.address}: no answer within {timeout_s:g} s")
    if ex.error is not None:
        hint = ""
        if ex.error.error_class == "protocol" and not http2 and base_url.startswith("http:"):
            hint = " (a server that speaks only HTTP/2? add --http2)"
        raise TargetError(f"cannot reach {origin.address}: {redact_text(str(ex.error))}{hint}")
