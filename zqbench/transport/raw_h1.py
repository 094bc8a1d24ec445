"""HTTP/1.1 over a bare asyncio `Protocol`: the hot path, and the default HTTP/1.1 transport.

Same contract as `aiohttp_h1.AiohttpTransport` (see `zqbench.transport.base`), built from the
event loop's own pieces so a request costs one `transport.write` and one future:

- a LIFO list of idle keep-alive connections (the most recently used one is the warmest);
  new connections are opened on demand, bounded by a permit semaphore of `max_connections`;
- the request (request line, headers, body) goes out in one `transport.write`;
- responses are parsed incrementally in `data_received` by a small pure-Python parser on
  `bytes` (`find` and slicing; no per-byte Python loop): status line, headers, Content-Length,
  chunked, or read-until-close bodies;
- every sink event carries the `perf_counter_ns()` stamp taken at the top of `data_received`,
  the moment the bytes were read, with no task wake-up in between (aiohttp stamps one loop
  iteration later, when the awaiting task resumes);
- a read larger than `PoolLimits.slice_bytes` (up to 256 KiB) is handed on a slice per loop
  iteration, reading paused meanwhile, so that the dispatcher's timers run between slices
  however large the response (its bytes keep the stamp of their read).

A connection whose response was incomplete, failed, or followed by stray bytes is closed and
never reused. A keep-alive connection the server closed while idle is dropped from the pool
when noticed. One closed as the request goes out (llama.cpp's server closes after every
streamed response, its headers promising keep-alive, and the FIN can land just after the
next request was written) fails before any byte of an answer: that request, and only it,
is sent once more on a new connection, as curl does, from the same t_send (its sample says
`resent`). No other retry: a failure after any byte of the answer is the request's own, and
so is a new connection's. After such a resend the pool stops reusing connections for the
rest of the run (each request opens its own), so that no further request needs one.

Measured (benchmarks/h1_clients.py, 2 shared cores, granian on the other one): about half
aiohttp's CPU per request, and the open-loop schedule held to 11000 req/s (aiohttp: ~5000).
Not done: write flow control (request bodies are buffered whole), pipelining, 100-continue.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections.abc import Callable
from time import perf_counter_ns
from typing import NamedTuple

from zqbench.transport import base
from zqbench.transport._common import (
    Deadline,
    PoolBase,
    cannot_connect,
    open_connection,
    reason,
)
from zqbench.transport._slices import SlicedProtocol
from zqbench.transport.base import (
    Exchange,
    HttpRequest,
    ResponseSink,
    asks_to_close,
)
from zqbench.transport.origin import client_ssl_context

MAX_HEAD_BYTES = 64 * 1024  # status line + headers; more is not a plausible response
MAX_CHUNK_LINE = 1024  # a chunk-size line with extensions
# A well-formed chunk-size line, read in one step: the common case of a stream, where each
# read is one token event's chunk (the step-by-step parse took 21% of the loop at 50,000
# events/s, #43). Anything else goes through the checks of the general path.
_CHUNK_LINE = re.compile(rb"[ \t]*([0-9a-fA-F]{1,15})[ \t]*(?:;[^\r\n]*)?\r\n").match
NO_CL_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS", "TRACE", "CONNECT"})
OUR_HEADERS = frozenset({"content-length", "transfer-encoding"})  # we frame the body ourselves
# Header lines kept encoded, first seen first kept: a dialect's own headers come with every
# request, so they are in; the per-request ones (x-request-id) fill the rest and miss.
MAX_KNOWN_LINES = 256
# Response heads already parsed, by their bytes: a server's heads repeat but for a Date that
# changes each second, and parsing one took about 5 µs of a request's ~150 at 10,000 req/s
# (#45). A server that stamps each one (timing headers) misses every time and clears it.
MAX_KNOWN_HEADS = 64

# Parser states.
_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_EOF = range(8)


class Head(NamedTuple):
    """A response head read: what the sink is told and how its body is framed."""

    status: int  # -1: an interim (1xx) response, a real one follows
    headers: dict[str, str]  # names lower-cased; repeated fields joined by ", "
    keep_alive: bool  # False: the connection closes after this response
    state: int  # the parser state its body starts in (_IDLE: no body)
    remaining: int  # Content-Length, for _LENGTH


def parse_head(head: bytes, head_only: bool) -> Head:
    """A status line and headers (without the blank line), checked; ProtocolViolation if
    they are not HTTP/1.1. `head_only`: the answer to a HEAD request, which has no body."""
    lines = head.split(b"\r\n")
    line = lines[0]
    code = line[9:12]
    if (
        not line.startswith(b"HTTP/1.")
        or len(line) < 12
        or line[8:9] != b" "
        or not (code.isdigit() and code.isascii())
        or (len(line) > 12 and line[12:13] != b" ")
    ):
        raise base.ProtocolViolation(f"bad status line {line[:40]!r}")
    status = int(code)
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        name, colon, value = raw.partition(b":")
        # No colon, an empty name, or whitespace in it (obs-fold included) is not HTTP.
        if not colon or not name or name != name.strip(b" \t") or b" " in name:
            raise base.ProtocolViolation(f"bad header line {raw[:40]!r}")
        k = name.decode("latin-1").lower()
        v = value.strip(b" \t").decode("utf-8", "surrogateescape")
        headers[k] = f"{headers[k]}, {v}" if k in headers else v
    if 100 <= status < 200 and status != 101:
        return Head(-1, headers, True, _HEAD, 0)
    conn = headers.get("connection", "").lower()
    keep_alive = not ("close" in conn or (line[7:8] == b"0" and "keep-alive" not in conn))
    te = headers.get("transfer-encoding")
    state, remaining = _IDLE, 0
    if head_only or status in (204, 304) or status < 200:
        if status == 101:
            keep_alive = False  # switched protocols: no longer HTTP/1.1 to us
    elif te is not None:
        if te.rsplit(",", 1)[-1].strip().lower() == "chunked":
            state = _CHUNK_SIZE
        else:
            state = _UNTIL_EOF  # RFC 9112 6.3: no chunked last means until close
            keep_alive = False
    elif "content-length" in headers:
        values = {v.strip() for v in headers["content-length"].split(",")}
        cl = values.pop()
        if values or not (cl.isdigit() and cl.isascii()):
            shown = headers["content-length"][:40]
            raise base.ProtocolViolation(f"bad Content-Length {shown!r}")
        remaining = int(cl)
        state = _LENGTH if remaining else _IDLE
    else:
        state, keep_alive = _UNTIL_EOF, False
    return Head(status, headers, keep_alive, state, remaining)


class _Conn(SlicedProtocol):
    """One keep-alive connection and the parser of the response in flight on it."""

    def __init__(
        self,
        cap: int,
        on_lost: Callable[[_Conn], None],
        slice_bytes: int = 16 * 1024,
        heads: dict[bytes, Head] | None = None,
    ) -> None:
        super().__init__(slice_bytes)  # reads reach `_received` a slice per loop iteration
        self.cap = cap
        self.heads: dict[bytes, Head] = {} if heads is None else heads  # the pool's, shared
        self.on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.reusable = False  # True only between a complete response and the next request
        self.state = _IDLE
        self.buf = b""  # unparsed bytes (a partial head, chunk-size line or CRLF)
        self.remaining = 0  # body or chunk bytes still expected
        self.keep_alive = True
        self.head_only = False  # a HEAD request: the response has no body whatever it says
        self.got_bytes = False  # anything of this response arrived (for the reset message)
        self.waiter: asyncio.Future[None] | None = None
        self.sink: ResponseSink | None = None
        self.ex: Exchange | None = None

    # -- the request side
    def request(
        self, wire: bytes, head_only: bool, sink: ResponseSink, ex: Exchange
    ) -> asyncio.Future[None]:
        """Write the request; the future completes when the response has ended or failed."""
        assert self.transport is not None and self.state == _IDLE
        self.reusable = False
        self.state = _HEAD
        self.buf = b""
        self.keep_alive = True
        self.head_only = head_only
        self.got_bytes = False
        self.sink, self.ex = sink, ex
        self.waiter = waiter = asyncio.get_running_loop().create_future()
        self.transport.write(wire)
        return waiter

    def drop(self) -> None:
        """Close without a goodbye: the connection's state is unknown or unwanted."""
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.reusable = True  # a fresh connection is ready for its first request

    def connection_lost(self, exc: Exception | None) -> None:
        self._hand_on_rest(lambda: self.waiter is not None and not self.waiter.done())
        self.reusable = False
        self.on_lost(self)
        if not self.lost.done():
            self.lost.set_result(None)
        w = self.waiter
        if w is None or w.done():
            return
        t = perf_counter_ns()
        if self.state == _UNTIL_EOF and exc is None:
            # A body without framing ends when the server closes: that is its normal end.
            try:
                self._finish(t)
            except BaseException as e:  # the sink's own bug: surface it in send()
                self._fail(e, t)
            return
        if exc is not None:
            err = base.ConnectionReset(f"connection lost mid-response: {reason(exc)}")
        elif self.got_bytes:
            err = base.ConnectionReset("connection closed mid-response")
        else:
            err = base.ConnectionReset("connection closed before any response")
        self._fail(err, t)

    def _received(self, data: bytes, t: int) -> None:
        """Parse what was read at `t` (every sink event below carries that stamp)."""
        w = self.waiter
        if w is None or w.done() or self.state == _IDLE:
            self.drop()  # bytes nobody asked for (or after a failure): never reuse this one
            return
        self.got_bytes = True
        buf = self.buf + data if self.buf else data
        self.buf = b""
        out: list[bytes] = []  # body pieces of this read, handed to the sink as one piece
        try:
            try:
                done, pos = self._parse(buf, out, t)
            finally:
                if out:  # pieces before a failure still count as received
                    self.sink.on_data(out[0] if len(out) == 1 else b"".join(out), t)  # type: ignore[union-attr]
            if done:
                if pos < len(buf):
                    self.keep_alive = False  # stray bytes after the response: do not reuse
                self._finish(t)
        except BaseException as e:  # TransportError, or the sink's own bug
            self._fail(e, t)

    # -- parsing
    def _body(self, piece: bytes, out: list[bytes]) -> None:
        ex = self.ex
        assert ex is not None
        ex.bytes_in += len(piece)
        if ex.bytes_in > self.cap:
            raise base.BodyTooLarge(f"response body passed {self.cap} bytes")
        out.append(piece)

    def _parse(self, buf: bytes, out: list[bytes], t: int) -> tuple[bool, int]:
        """Consume `buf`; return (response complete, bytes used). Keeps a partial tail."""
        pos, n = 0, len(buf)
        while True:
            st = self.state
            if st in (_LENGTH, _CHUNK_DATA):
                take = min(self.remaining, n - pos)
                if take:
                    self._body(buf if take == n else buf[pos : pos + take], out)
                    pos += take
                    self.remaining -= take
                if self.remaining:
                    return False, pos  # the read is used up
                if st == _LENGTH:
                    return True, pos
                self.state = _CHUNK_CRLF
            elif st == _CHUNK_SIZE:
                m = _CHUNK_LINE(buf, pos)
                if m is not None:
                    data = m.end()
                    data_end = data + int(m.group(1), 16)
                    if data_end > data and buf[data_end : data_end + 2] == b"\r\n":
                        self._body(buf[data:data_end], out)  # a whole chunk and its CRLF
                        pos = data_end + 2
                        if pos == n:
                            return False, n  # the read was that chunk: a token event's
                        continue
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return self._more(buf, pos, MAX_CHUNK_LINE, "chunk-size line")
                field = buf[pos:eol].split(b";", 1)[0].strip(b" \t")
                try:
                    if not field or field.lstrip(b"0123456789abcdefABCDEF"):
                        raise ValueError
                    size = int(field, 16)
                except ValueError:
                    raise base.ProtocolViolation(f"bad chunk size {field[:20]!r}") from None
                pos = eol + 2
                if size:
                    self.remaining = size
                    self.state = _CHUNK_DATA
                else:
                    self.state = _TRAILER
            elif st == _CHUNK_CRLF:
                if n - pos < 2:
                    self.buf = buf[pos:]
                    return False, n
                if buf[pos : pos + 2] != b"\r\n":
                    raise base.ProtocolViolation("chunk data not followed by CRLF")
                pos += 2
                self.state = _CHUNK_SIZE
            elif st == _TRAILER:
                # Trailer fields (ignored) end with an empty line; usually there are none.
                if buf.startswith(b"\r\n", pos):
                    return True, pos + 2
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    return self._more(buf, pos, MAX_HEAD_BYTES, "trailer section")
                return True, end + 4
            elif st == _HEAD:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    # Fail garbage at once rather than wait for a head that never comes.
                    start = buf[pos : pos + 5]
                    if b"HTTP/"[: len(start)] != start:
                        raise base.ProtocolViolation(f"not an HTTP response: {start!r}")
                    return self._more(buf, pos, MAX_HEAD_BYTES, "response head")
                status = self._head(buf[pos:end], t)
                pos = end + 4
                if status < 0:
                    continue  # a 1xx interim response: the real one follows
                if self.state == _IDLE:
                    return True, pos  # no body
            elif st == _UNTIL_EOF:
                if pos < n:
                    self._body(buf[pos:] if pos else buf, out)
                return False, n
            else:
                raise base.ProtocolViolation("bytes after the response")

    def _more(self, buf: bytes, pos: int, limit: int, what: str) -> tuple[bool, int]:
        """Keep an incomplete line or head for the next read; one longer than `limit` is not
        HTTP (and would grow without end). Returns `_parse`'s (not complete, all used)."""
        if len(buf) - pos > limit:
            raise base.ProtocolViolation(f"{what} too long")
        self.buf = buf[pos:]
        return False, len(buf)

    def _head(self, head: bytes, t: int) -> int:
        """Parse a status line and headers, tell the sink, and pick the body framing."""
        known = self.heads.get(head)
        if known is None or self.head_only:
            known = parse_head(head, self.head_only)
            if known.status >= 200 and not self.head_only:
                heads = self.heads
                if len(heads) >= MAX_KNOWN_HEADS:
                    heads.clear()  # a server whose heads all differ: start over
                heads[head] = known
        if known.status < 0:
            return -1  # interim: no sink event, keep reading heads
        if not known.keep_alive:
            self.keep_alive = False
        self.sink.on_headers(known.status, known.headers, t)  # type: ignore[union-attr]
        self.state, self.remaining = known.state, known.remaining
        return known.status

    # -- the end of one response
    def _finish(self, t: int) -> None:
        self.state = _IDLE
        ex, sink, w = self.ex, self.sink, self.waiter
        assert ex is not None and sink is not None and w is not None
        ex.t_end = t
        sink.on_end(t)
        self.sink = self.ex = None
        self.reusable = self.keep_alive and self.transport is not None
        if not w.done():
            w.set_result(None)

    def _fail(self, e: BaseException, t: int) -> None:
        self.state = _IDLE
        self.reusable = False
        if self.ex is not None and not self.ex.t_end:
            self.ex.t_end = t
        self.sink = self.ex = None
        if self.transport is not None:
            self.transport.abort()
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(e)


class RawH1Transport(PoolBase):
    """HTTP/1.1 keep-alive pool to one origin over asyncio Protocols. Retries only a request
    whose reused connection was closed under it before any byte of an answer."""

    http_version = "1.1"

    def _setup(self) -> None:
        self._ssl: ssl.SSLContext | None = None
        self._address: tuple[int, str, int] | None = None  # (family, ip, port), resolved in open()
        self._idle: list[_Conn] = []  # LIFO: the most recently used connection first
        self._conns: set[_Conn] = set()
        self._opened = False
        self.opened = 0  # connections opened so far (tests and diagnostics)
        # Requests sent again on a new connection: their kept-alive one was closed by the
        # server as they went out, before any byte of an answer (tests and diagnostics).
        self.stale_retries = 0
        # Once one had to be sent again, the server is known to close kept-alive connections
        # under requests: every later request opens its own connection, so none needs it.
        self.reuse_stopped = False
        # One permit per connection: a request waits here, before `t_send`, when every
        # connection is busy, so the wait is the generator's lateness, never `latency`.
        self._permits = asyncio.Semaphore(self.limits.max_connections)
        host = self.origin.authority
        self._host_line = f"Host: {host}\r\n"
        self._lines: dict[tuple[str, str], tuple[str, str]] = {}  # (name, value) -> (lower, line)
        self._heads: dict[bytes, Head] = {}  # response heads parsed, by their bytes

    # -- setup
    async def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        if self.origin.tls:
            self._ssl = client_ssl_context(self.insecure, ["http/1.1"])
        await self._resolve_and_warm()

    async def _resolve_and_warm(self) -> None:
        """Resolve once (DNS never lands inside a measured request), then warm the pool."""
        loop = asyncio.get_running_loop()
        o = self.origin
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(o.host, o.port, type=socket.SOCK_STREAM),
                self.limits.connect_timeout_s,
            )
        except (OSError, asyncio.TimeoutError) as e:
            raise cannot_connect(o, reason(e)) from None
        # The first address that accepts a connection is the one every later connection uses.
        first: _Conn | None = None
        error: base.ConnectError | None = None
        for family, _, _, _, addr in infos:
            self._address = (family, str(addr[0]), int(addr[1]))
            try:
                first = await self._connect()
                break
            except base.ConnectError as e:
                error = e
        if first is None:
            raise error or cannot_connect(o, "no address")
        if self.limits.warm_connections < 1:
            first.drop()  # no warm connection asked for: this one only chose the address
            return
        self._idle.append(first)
        n = min(self.limits.warm_connections, self.limits.max_connections)
        results = await asyncio.gather(
            *(self._connect() for _ in range(n - 1)), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r
            self._idle.append(r)

    async def _connect(self) -> _Conn:
        cap, slice_bytes = self.limits.max_body_bytes, self.limits.slice_bytes
        conn = await open_connection(
            lambda: _Conn(cap, self._conns.discard, slice_bytes, self._heads),
            self.origin,
            self.limits.connect_timeout_s,
            ssl_ctx=self._ssl,
            address=self._address,
        )
        self._conns.add(conn)
        self.opened += 1
        return conn

    # -- the hot path
    def _wire(self, request: HttpRequest) -> bytes:
        """The request as bytes: built per request (the engine makes each one unique)."""
        names = set()
        parts = [f"{request.method} {self.origin.prefix}{request.path} HTTP/1.1\r\n"]
        lines = self._lines
        for kv in request.headers:
            known = lines.get(kv)
            if known is None:
                k, v = kv
                known = (k.lower(), f"{k}: {v}\r\n")
                if len(lines) < MAX_KNOWN_LINES:
                    lines[kv] = known
            lk, line = known
            if lk in OUR_HEADERS:
                continue
            names.add(lk)
            parts.append(line)
        user = len(parts) - 1
        text = "".join(parts)
        # A CR or LF inside a name or value would let it forge headers: refuse, as aiohttp does.
        if text.count("\n") != user + 1 or text.count("\r") != user + 1:
            raise ValueError("CR or LF in a request header or the request path")
        if "host" not in names:
            text += self._host_line
        if "user-agent" not in names:
            text += "User-Agent: zqbench\r\n"
        if "connection" not in names:
            text += "Connection: keep-alive\r\n"
        body = request.body
        if body or request.method not in NO_CL_METHODS:
            text += f"Content-Length: {len(body)}\r\n"
        return text.encode("utf-8") + b"\r\n" + body

    async def send(
        self, request: HttpRequest, sink: ResponseSink, timeout_s: float, ex: Exchange
    ) -> Exchange:
        if not self._opened:
            raise RuntimeError("RawH1Transport.send() before open()")
        ex.http_version = "1.1"
        wire = self._wire(request)
        head_only = request.method == "HEAD"
        # Stamped only when every permit is taken: a free one is had at once, and the time
        # between two stamps would be whatever descheduled this process, not a wait.
        asked = perf_counter_ns() if self._permits.locked() else 0
        async with self._permits:
            if asked:
                ex.connection_wait += perf_counter_ns() - asked
            conn: _Conn | None = None
            try:
                with Deadline(timeout_s, self.timeouts):
                    conn = self._idle_conn()
                    # A connection in hand: write now; none: latency includes its setup.
                    ex.t_send = perf_counter_ns()
                    if conn is None:
                        conn = await self._connect()
                        await conn.request(wire, head_only, sink, ex)
                    else:
                        try:
                            await conn.request(wire, head_only, sink, ex)
                        except base.ConnectionReset:
                            if conn.got_bytes:
                                raise
                            # The server closed this kept-alive connection as the request
                            # went out, unread: once more, on a new connection, as curl does.
                            conn.drop()
                            self.stale_retries += 1
                            ex.resent = True
                            self._stop_reuse()
                            ex.t_end = 0
                            conn = await self._connect()
                            await conn.request(wire, head_only, sink, ex)
            except base.TransportError as e:
                if not ex.t_end:
                    ex.t_end = perf_counter_ns()
                ex.error = e
            finally:
                if conn is not None:
                    reuse = (
                        self.limits.reuse_connections
                        and not self.reuse_stopped
                        and not asks_to_close(request)
                    )
                    if conn.reusable and reuse:
                        self._idle.append(conn)
                    else:
                        conn.drop()  # incomplete, failed, or closing: never reused
        return ex

    def _stop_reuse(self) -> None:
        """No connection is reused from now on; the idle ones are closed."""
        self.reuse_stopped = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.drop()

    def _idle_conn(self) -> _Conn | None:
        """The warmest idle connection still open; None: open a new one."""
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.reusable:
                return conn
            conn.drop()  # closed by the server while idle
        return None

    async def close(self) -> None:
        self._opened = False  # send() after close() is a bug, as with the aiohttp transport
        self._idle.clear()
        conns = list(self._conns)
        for c in conns:
            c.reusable = False
            if c.transport is not None:
                c.transport.close()
        if conns:
            # Wait for the sockets to be released, so none outlives the loop unclosed.
            _, pending = await asyncio.wait([c.lost for c in conns], timeout=1.0)
            for c in conns:
                if not c.lost.done():
                    c.drop()
            if pending:
                await asyncio.sleep(0)
