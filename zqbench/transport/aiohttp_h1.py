"""HTTP/1.1 over aiohttp: the selectable reference (`--h1-client aiohttp`).

The default, `raw_h1`, holds about twice aiohttp's open-loop rate at half its CPU per
request (docs/performance.md); aiohttp stays as a widely used client to compare against.

One `ClientSession` with a keep-alive `TCPConnector` per transport. aiohttp's exceptions are
translated in exactly one place, `_map_errors`, into the tree of `zqbench.transport.base`.

Timestamps: aiohttp parses in its protocol's `data_received` and wakes our task on the next
loop iteration; we stamp when the task resumes (headers: `session.request` returned; data:
each `iter_any()` chunk). That is one loop iteration after the read, well under a millisecond
on an unsaturated loop.

Compression: we do not send `Accept-Encoding` and keep `auto_decompress=False`, so the server
has no reason to compress, the sink sees the bytes exactly as they arrived, `bytes_in` counts
wire body bytes, and no decompression CPU is charged to the measurement.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ssl
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import aiohttp
from aiohttp import client_exceptions as cx
from aiohttp import http_exceptions as hx
from aiohttp.client_proto import ResponseHandler
from yarl import URL

from zqbench.transport import base
from zqbench.transport._common import (
    Deadline,
    PoolBase,
    first_line,
    no_answer,
    now_ns,
)
from zqbench.transport.base import (
    Exchange,
    HttpRequest,
    ResponseSink,
    asks_to_close,
)
from zqbench.transport.origin import client_ssl_context

READ_BUFSIZE = 1 << 20  # read up to 1 MiB per wake-up: big bodies in few chunks

T = TypeVar("T")


@contextmanager
def _map_errors(address: str) -> Iterator[None]:
    """Translate aiohttp/OS errors to TransportError; the only place that knows aiohttp's tree.

    Order matters: the connector errors subclass ClientOSError, the payload and response
    errors subclass ClientError.
    """
    try:
        yield
    except base.TransportError:
        raise
    except (cx.ClientConnectorError, cx.ClientSSLError, cx.ConnectionTimeoutError) as e:
        raise base.ConnectError(f"cannot connect to {address}: {_reason(e)}") from e
    except (cx.ServerDisconnectedError, cx.ClientPayloadError) as e:
        # A payload error is a body cut short (Content-Length or chunked framing not
        # completed): the peer went away mid-response, unless the framing itself was invalid.
        cause = e.__cause__ or e.__context__
        if isinstance(cause, hx.BadHttpMessage) and not isinstance(
            cause, (hx.ContentLengthError, hx.TransferEncodingError)
        ):
            raise base.ProtocolViolation(f"invalid response body framing: {cause}") from e
        raise base.ConnectionReset(f"connection closed mid-response: {_reason(e)}") from e
    except (cx.ClientResponseError, hx.HttpProcessingError) as e:
        # aiohttp reports unparseable status lines/headers as ClientResponseError(400, ...).
        raise base.ProtocolViolation(f"invalid HTTP response: {_reason(e)}") from e
    except (cx.ServerTimeoutError, asyncio.TimeoutError) as e:
        raise base.RequestTimeout(f"timed out: {_reason(e)}") from e
    except (cx.ClientOSError, ConnectionError, OSError) as e:
        raise base.ConnectionReset(f"connection error: {_reason(e)}") from e
    except cx.ClientError as e:
        raise base.TransportError(f"{type(e).__name__}: {_reason(e)}") from e


def _reason(e: BaseException) -> str:
    if isinstance(e, cx.ClientConnectorError):
        return e.os_error.strerror or str(e.os_error) or type(e.os_error).__name__
    if isinstance(e, cx.ClientResponseError):
        return e.message or type(e).__name__
    return first_line(e)


class _Stamp:
    """One attempt of one request: when its connection was in hand (`sent`), when it began
    opening a new one (`connecting`, 0: it reused one), and that connection's protocol."""

    __slots__ = ("connecting", "proto", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.connecting = 0
        self.proto: _Handler | None = None

    def closed_unread(self) -> bool:
        """A reused connection that ended before any byte of this attempt's answer."""
        proto = self.proto
        return bool(self.sent) and not self.connecting and proto is not None and not proto.got_bytes


# Set in the request's own task by the classes below (a ContextVar carries the holder with
# no per-request object lookups).
_SEND_STAMP: contextvars.ContextVar[_Stamp] = contextvars.ContextVar("zq_send_stamp")


class _Handler(ResponseHandler):
    """aiohttp's protocol, noting whether any byte arrived since the request went out."""

    got_bytes = False

    def data_received(self, data: bytes) -> None:
        if data:
            self.got_bytes = True
        super().data_received(data)


class _StampedRequest(aiohttp.ClientRequest):
    """Stamps the moment a connection is in hand, right before the request is written.

    Stamping before `session.request()` would charge aiohttp's request building and pool
    lookup (a few hundred microseconds here) to the server's latency."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        stamp = _SEND_STAMP.get(None)
        if stamp is not None:
            stamp.sent = now_ns()
            proto = conn.protocol
            if isinstance(proto, _Handler):
                proto.got_bytes = False
                stamp.proto = proto
        return await super().send(conn)


class _StampedConnector(aiohttp.TCPConnector):
    """Stamps the start of a new connection: when a request has to open one, its latency
    starts there. Connection setup (and a server slow to accept) is the server's side of
    the exchange, not the generator's lateness."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._factory = functools.partial(_Handler, loop=self._loop)  # type: ignore[assignment]

    async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> Any:
        stamp = _SEND_STAMP.get(None)
        if stamp is not None and not stamp.connecting:
            stamp.connecting = now_ns()
        return await super()._create_connection(req, traces, timeout)

    def stop_reuse(self) -> None:
        """No connection is pooled from now on; the idle ones are closed."""
        self._force_close = True
        idle = [proto for conns in self._conns.values() for proto, _ in conns]
        self._conns.clear()
        for proto in idle:
            proto.close()


class AiohttpTransport(PoolBase):
    """HTTP/1.1 keep-alive pool to one origin. Retries only a request whose reused connection
    was closed under it before any byte of an answer (as raw_h1), once, on a new one."""

    http_version = "1.1"

    def _setup(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = False
        self._base = self.origin.url("")
        # One permit per pooled connection: a request waits here, before `t_send`, when every
        # connection is busy. The wait is the sample's `connection_wait`, counted in
        # latency_corrected and never hidden inside `latency`.
        self._permits = asyncio.Semaphore(self.limits.max_connections)
        # Requests sent again on a new connection (tests and diagnostics), and whether the
        # pool stopped reusing connections because one had to be.
        self.stale_retries = 0
        self.reuse_stopped = False

    async def _open(self) -> None:
        if self._session is not None:
            return
        if self.origin.tls:
            self._ssl = client_ssl_context(self.insecure, ["http/1.1"])
        reuse = self.limits.reuse_connections
        connector = _StampedConnector(
            limit=self.limits.max_connections,
            limit_per_host=0,
            # Cold connections: aiohttp may pool a connection before send() sees its response
            # (a whole answer in one read), so only the connector can promise no reuse.
            force_close=not reuse,
            # Keep idle connections: a quiet stage must not cost reconnects.
            keepalive_timeout=3600 if reuse else None,
            ttl_dns_cache=None,  # resolve once; DNS never lands inside a measured request
            enable_cleanup_closed=False,
            ssl=self._ssl,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(
                total=None, connect=None, sock_connect=self.limits.connect_timeout_s
            ),
            auto_decompress=False,
            read_bufsize=READ_BUFSIZE,
            skip_auto_headers=("Accept-Encoding", "Content-Type"),
            headers={"User-Agent": "zqbench"},
            cookie_jar=aiohttp.DummyCookieJar(),  # cookies would make requests differ
            request_class=_StampedRequest,
            raise_for_status=False,
        )
        # aiohttp would resend an idempotent request itself, after any failure of a reused
        # connection and unseen: the one resend is ours (`_exchange`), and only before a byte.
        self._session._retry_connection = False
        await self._warm(min(self.limits.warm_connections, self.limits.max_connections))

    async def _warm(self, n: int) -> None:
        """Open `n` connections up front so setup cost is not charged to measured requests."""
        assert self._session is not None
        connector = self._session.connector
        assert connector is not None
        timeout = aiohttp.ClientTimeout(sock_connect=self.limits.connect_timeout_s)
        # ssl=True as session.request() passes by default: the pool key must match the
        # measured requests' key, or they would never reuse these connections.
        req = aiohttp.ClientRequest(
            "GET", URL(self._base + "/"), loop=asyncio.get_running_loop(), ssl=True
        )
        # All n connect attempts run at once; the connector pools each one on release().
        connects = (self._while_connecting(connector.connect(req, [], timeout)) for _ in range(n))
        results = await asyncio.gather(*connects, return_exceptions=True)
        conns = [r for r in results if not isinstance(r, BaseException)]
        for c in conns:
            c.release()
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _while_connecting(self, step: Awaitable[T]) -> T:
        """A step of `open()`, bounded by the connect timeout; failures are ConnectError."""
        timeout = self.limits.connect_timeout_s
        with _map_errors(self.origin.address):
            try:
                return await asyncio.wait_for(step, timeout)
            except asyncio.TimeoutError:
                raise no_answer(self.origin, timeout) from None

    async def send(
        self, request: HttpRequest, sink: ResponseSink, timeout_s: float, ex: Exchange
    ) -> Exchange:
        session = self._session
        if session is None:
            raise RuntimeError("AiohttpTransport.send() before open()")
        ex.http_version = "1.1"
        asked = now_ns() if self._permits.locked() else 0  # as raw_h1: only a real wait
        async with self._permits:
            if asked:
                ex.connection_wait += now_ns() - asked
            await self._exchange(session, request, sink, timeout_s, ex)
        return ex

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        request: HttpRequest,
        sink: ResponseSink,
        timeout_s: float,
        ex: Exchange,
    ) -> None:
        cap, piece = self.limits.max_body_bytes, self.limits.slice_bytes
        url = URL(self._base + request.path, encoded=True)  # encoded: no re-quoting per request
        resp: aiohttp.ClientResponse | None = None
        stamp = _Stamp()
        _SEND_STAMP.set(stamp)
        try:
            with Deadline(timeout_s, self.timeouts), _map_errors(self.origin.address):
                ex.t_send = now_ns()  # replaced by the stamp once a connection is in hand
                try:
                    resp = await self._request(session, request, url)
                except (cx.ServerDisconnectedError, cx.ClientOSError) as e:
                    if isinstance(e, cx.ClientConnectorError) or not stamp.closed_unread():
                        raise
                    # The server closed this kept-alive connection as the request went out,
                    # unread: once more, on a new connection (none is pooled from now on).
                    self._resent(session, ex)
                    first, stamp = stamp, _Stamp()
                    _SEND_STAMP.set(stamp)
                    try:
                        resp = await self._request(session, request, url)
                    finally:
                        stamp = first  # latency runs from the first attempt's send
                finally:
                    if stamp.connecting or stamp.sent:
                        ex.t_send = stamp.connecting or stamp.sent
                t = now_ns()
                conn = resp.connection
                if asks_to_close(request) and conn is not None and conn.protocol is not None:
                    # aiohttp pools a connection whatever the request's `Connection` says.
                    conn.protocol.force_close()
                sink.on_headers(resp.status, {k.lower(): v for k, v in resp.headers.items()}, t)
                handed = 0  # bytes given to the sink since the loop last ran
                async for chunk in resp.content.iter_any():
                    t = now_ns()
                    ex.bytes_in += len(chunk)
                    if ex.bytes_in > cap:
                        raise base.BodyTooLarge(f"response body passed {cap} bytes")
                    # At most `piece` bytes per loop iteration, so a send due meanwhile is not
                    # held up by the parsing (as in raw_h1). A chunk already buffered comes
                    # back without a wait, so the count runs across chunks.
                    for start in range(0, len(chunk), piece):
                        part = chunk if len(chunk) <= piece else chunk[start : start + piece]
                        if handed + len(part) > piece:
                            await asyncio.sleep(0)
                            handed = 0
                        sink.on_data(part, t)
                        handed += len(part)
                ex.t_end = now_ns()
                resp.release()  # back to the pool for keep-alive
                sink.on_end(ex.t_end)
        except base.TransportError as e:
            ex.t_end = now_ns()
            ex.error = e
            if resp is not None:
                resp.close()  # drop the connection: its state is unknown

    async def _request(
        self, session: aiohttp.ClientSession, request: HttpRequest, url: URL
    ) -> aiohttp.ClientResponse:
        return await session.request(
            request.method,
            url,
            headers=request.headers,
            data=request.body or None,
            allow_redirects=False,
        )

    def _resent(self, session: aiohttp.ClientSession, ex: Exchange) -> None:
        """A request sent once more: count it, and stop reusing connections."""
        self.stale_retries += 1
        ex.resent = True
        if not self.reuse_stopped:
            self.reuse_stopped = True
            connector = session.connector
            if isinstance(connector, _StampedConnector):
                connector.stop_reuse()

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
