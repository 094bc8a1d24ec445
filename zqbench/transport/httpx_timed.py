"""`zqbench probe`: sequential requests with a curl-style time breakdown, over httpx.

Throughput does not matter here, clarity does, so this measuring tool uses httpx (the control
plane, zqbench.target.control, is the other user), the client people reach for.
httpx reports no phase times, but its `trace` request extension calls us at each httpcore
step (`connection.connect_tcp.started`, `connection.start_tls.complete`,
`http11.receive_response_headers.complete`, ...); we stamp those with perf_counter_ns.
httpcore resolves names inside connect_tcp, so we resolve the host ourselves (timed: `dns`)
and connect to the address, sending the original Host header and TLS SNI name.

All phases are measured from the request's start, like curl's -w times, but each field is the
phase's own duration except `ttfb_ns` and `total_ns`, which are from the start:

    dns_ns      name resolution (None when no new connection was opened)
    connect_ns  TCP connect        (None when the connection was reused)
    tls_ns      TLS handshake      (None for http:// or a reused connection)
    ttfb_ns     start -> response status line and headers received
    total_ns    start -> last body byte received

The body is not interpreted here: a caller that wants to know what it meant (the dialect's
parser, for TTFT) passes `new_sink`, and each request's sink gets the headers, every body
piece stamped with perf_counter_ns the moment httpx handed it over (decoded, as a parser
needs it), and the end. `t_start_ns` places those stamps: TTFT = t_first_token - t_start_ns.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from zqbench.transport.base import (
    ConnectError,
    ConnectionReset,
    HttpRequest,
    ProtocolViolation,
    RequestTimeout,
    ResponseSink,
    TransportError,
)
from zqbench.transport.origin import Origin, parse_base_url


@dataclass(frozen=True, slots=True)
class ProbeResult:
    dns_ns: int | None
    connect_ns: int | None
    tls_ns: int | None
    ttfb_ns: int | None  # None when the request failed before the headers
    total_ns: int  # until the last byte, or until the failure
    status: int  # 0 when no response
    error: str | None  # TransportError.error_class, e.g. "timeout", "reset"
    bytes_in: int
    http_version: str = ""
    reused_connection: bool = False
    t_start_ns: int = 0  # perf_counter_ns at the request's start (its name lookup included)


@contextmanager
def _map_httpx_errors(address: str) -> Iterator[None]:
    """httpx's exception tree to ours, in one place (as httpx itself maps httpcore's)."""
    try:
        yield
    except (httpx.ConnectError, httpx.ConnectTimeout) as e:
        raise ConnectError(f"cannot connect to {address}: {_first_line(e)}") from e
    except httpx.TimeoutException as e:
        raise RequestTimeout(f"timed out: {type(e).__name__}") from e
    except httpx.RemoteProtocolError as e:
        if "disconnected" in str(e) or "incomplete" in str(e).lower():
            raise ConnectionReset(f"connection closed mid-response: {_first_line(e)}") from e
        raise ProtocolViolation(f"invalid HTTP response: {_first_line(e)}") from e
    except (httpx.ReadError, httpx.WriteError, httpx.CloseError) as e:
        raise ConnectionReset(f"connection error: {_first_line(e)}") from e
    except httpx.HTTPError as e:
        raise TransportError(f"{type(e).__name__}: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _resolve(origin: Origin) -> tuple[str, int]:
    """Resolve the host (timed by the caller) and return an address to connect to."""
    try:
        infos = socket.getaddrinfo(origin.host, origin.port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ConnectError(f"cannot resolve {origin.host}: {e.strerror}") from e
    family, _, _, _, sockaddr = infos[0]
    host = str(sockaddr[0])
    return (f"[{host}]" if family == socket.AF_INET6 else host), origin.port


def probe(
    url: str,
    request: HttpRequest,
    n: int,
    *,
    http2: bool = False,
    timeout_s: float = 10,
    fresh_connections: bool = False,
    insecure: bool = False,
    new_sink: Callable[[], ResponseSink] | None = None,
) -> list[ProbeResult]:
    """Send `request` to `url` `n` times, one after another, and time each phase.

    Raises ConnectError (one line naming the address) when a connection cannot be opened;
    other failures are recorded in the result's `error`. `fresh_connections` opens a new
    connection (and resolves the name again) for every request. `new_sink`, when given, is
    called once per request, in order, before it is sent: its sink reads that response.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    origin = parse_base_url(url)
    results: list[ProbeResult] = []
    client: httpx.Client | None = None
    try:
        for _ in range(n):
            dns_ns = None
            if client is None or fresh_connections:
                if client is not None:
                    client.close()
                t0 = time.perf_counter_ns()
                ip, port = _resolve(origin)
                dns_ns = time.perf_counter_ns() - t0
                client = httpx.Client(
                    http1=not http2,
                    http2=http2,
                    verify=not insecure,
                    timeout=timeout_s,
                    follow_redirects=False,
                    trust_env=False,  # a probe must reach the target, not a proxy
                )
                base = f"{origin.scheme}://{ip}:{port}{origin.prefix}"
            sink = new_sink() if new_sink is not None else None
            results.append(_one(client, base, origin, request, dns_ns, sink))
    finally:
        if client is not None:
            client.close()
    return results


_HEADERS_READ = (
    "http11.receive_response_headers.complete",
    "http2.receive_response_headers.complete",
)


def _one(
    client: httpx.Client,
    base: str,
    origin: Origin,
    request: HttpRequest,
    dns_ns: int | None,
    sink: ResponseSink | None,
) -> ProbeResult:
    marks: dict[str, int] = {}

    def trace(event: str, info: dict[str, object]) -> None:
        marks[event] = time.perf_counter_ns()

    headers = [(k, v) for k, v in request.headers if k.lower() != "host"]
    headers.append(("host", origin.authority))
    req = client.build_request(
        request.method,
        base + request.path,
        headers=headers,
        content=request.body or None,
        extensions={"trace": trace, "sni_hostname": origin.host},
    )
    t0 = time.perf_counter_ns() - (dns_ns or 0)  # the request's start includes the lookup
    status, bytes_in, version, error, t_headers = 0, 0, "", None, None
    try:
        with _map_httpx_errors(origin.address):
            resp = client.send(req, stream=True)
            try:
                # Stamped by httpcore's own read, before httpx wraps the response.
                t_headers = next((marks[k] for k in _HEADERS_READ if k in marks), None)
                if t_headers is None:
                    t_headers = time.perf_counter_ns()
                status, version = resp.status_code, resp.http_version
                _read_body(resp, t_headers, sink)
            finally:
                bytes_in = resp.num_bytes_downloaded
                resp.close()
    except ConnectError:
        raise
    except TransportError as e:
        error = e.error_class
    t_end = time.perf_counter_ns()
    if sink is not None and error is None:
        sink.on_end(t_end)

    def span(phase: str) -> int | None:
        start, done = marks.get(f"{phase}.started"), marks.get(f"{phase}.complete")
        return done - start if start is not None and done is not None else None

    connect_ns = span("connection.connect_tcp")
    return ProbeResult(
        dns_ns=dns_ns,
        connect_ns=connect_ns,
        tls_ns=span("connection.start_tls"),
        ttfb_ns=None if t_headers is None else t_headers - t0,
        total_ns=t_end - t0,
        status=status,
        error=error,
        bytes_in=bytes_in,
        http_version=version.removeprefix("HTTP/") if version else "",
        reused_connection=connect_ns is None,
        t_start_ns=t0,
    )


def _read_body(resp: httpx.Response, t_headers: int, sink: ResponseSink | None) -> None:
    """Read the body to its end, handing each piece to `sink` with its arrival time."""
    if sink is None:
        for _ in resp.iter_raw():
            pass
        return
    sink.on_headers(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, t_headers)
    for piece in resp.iter_bytes():
        sink.on_data(piece, time.perf_counter_ns())
