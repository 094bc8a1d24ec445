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
import ssl
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import aiohttp
from aiohttp import client_exceptions as cx
from aiohttp import http_exceptions as hx
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


# [request written, new connection started]: set in the request's own task by the two
# classes below (a ContextVar carries the holder with no per-request object lookups).
_SEND_STAMP: contextvars.ContextVar[list[int]] = contextvars.ContextVar("zq_send_stamp")


class _StampedRequest(aiohttp.ClientRequest):
    """Stamps the moment a connection is in hand, right before the request is written.

    Stamping before `session.request()` would charge aiohttp's request building and pool
    lookup (a few hundred microseconds here) to the server's latency."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        stamp = _SEND_STAMP.get(None)
        if stamp is not None:
            stamp[0] = now_ns()
        return await super().send(conn)


class _StampedConnector(aiohttp.TCPConnector):
    """Stamps the start of a new connection: when a request has to open one, its latency
    starts there. Connection setup (and a server slow to accept) is the server's side of
    the exchange, not the generator's lateness."""

    async def _create_connection(self, req: Any, traces: Any, timeout: Any) -> Any:
        stamp = _SEND_STAMP.get(None)
        if stamp is not None and not stamp[1]:
            stamp[1] = now_ns()
        return await super()._create_connection(req, traces, timeout)


class AiohttpTransport(PoolBase):
    """HTTP/1.1 keep-alive pool to one origin. Never retries."""

    http_version = "1.1"

    def _setup(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = False
        self._base = self.origin.url("")
        # One permit per pooled connection: a request waits here, before `t_send`, when every
        # connection is busy, so the wait is the generator's lateness (schedule_lag and
        # latency_corrected), never hidden inside `latency`.
        self._permits = asyncio.Semaphore(self.limits.max_connections)

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
        results = await asyncio.gather(
            *(self._connect_one(connector, req, timeout) for _ in range(n)), return_exceptions=True
        )
        conns = [r for r in results if not isinstance(r, BaseException)]
        for c in conns:
            c.release()
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    async def _connect_one(
        self, connector: aiohttp.BaseConnector, req: aiohttp.ClientRequest, t: aiohttp.ClientTimeout
    ) -> aiohttp.connector.Connection:
        return await self._while_connecting(connector.connect(req, [], t))

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
        async with self._permits:
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
        stamp = [0, 0]
        _SEND_STAMP.set(stamp)
        try:
            with Deadline(timeout_s), _map_errors(self.origin.address):
                ex.t_send = now_ns()  # replaced by the stamp once a connection is in hand
                try:
                    resp = await session.request(
                        request.method,
                        url,
                        headers=request.headers,
                        data=request.body or None,
                        allow_redirects=False,
                    )
                finally:
                    if stamp[1] or stamp[0]:
                        ex.t_send = stamp[1] or stamp[0]
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

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
