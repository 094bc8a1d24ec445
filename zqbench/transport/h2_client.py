"""HTTP/2 on h2's state machine over a plain asyncio Protocol.

h2c with prior knowledge for `http://`, TLS with ALPN "h2" for `https://`. A small pool of
connections (default one); a new one opens only when every open connection has as many
streams in flight as the server allows. Events are stamped once per socket read, in
`data_received`, before h2 parses them: the stamp is the moment the bytes were read. A read
larger than `PoolLimits.slice_bytes` goes to h2 a slice per loop iteration, reading paused
meanwhile (as in raw_h1), so a large response never holds up the dispatcher.

Flow control: we advertise a 16 MiB stream window and a 1 GiB connection window, so a stream
never waits on us. What a stream received is acknowledged to h2 (which sends WINDOW_UPDATE once
half a window is used) a MiB at a time and at the stream's end, and all of it whenever 64 MiB
wait on a connection: acknowledging each DATA frame as it came took 12% of the client's time at
50,000 token events a second (#43). Request bodies respect the server's windows.

Errors: an RST_STREAM or a dropped connection is ConnectionReset; a GOAWAY fails only the
streams the server says it never processed (ConnectionReset) and lets the others finish; bytes
h2 cannot parse are ProtocolViolation; a timeout sends RST_STREAM(CANCEL). Never retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from zqbench.transport import base
from zqbench.transport._common import (
    Deadline,
    PoolBase,
    now_ns,
    open_connection,
)
from zqbench.transport._slices import SlicedProtocol
from zqbench.transport.base import Exchange, HttpRequest, ResponseSink
from zqbench.transport.origin import client_ssl_context

STREAM_WINDOW = 1 << 24
CONNECTION_WINDOW = 1 << 30
ACK_EVERY = 1 << 20  # a stream's received bytes acknowledged at once: 1/16 of its window
ACK_ALL_AT = 1 << 26  # every stream's, once this much waits on a connection: 1/16 of its window
# Connection-specific headers are forbidden in HTTP/2 (RFC 9113 §8.2.2); host becomes :authority.
_DROP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"}


class _Stream:
    __slots__ = ("cap", "done", "error", "ex", "sink", "window")

    def __init__(self, sink: ResponseSink, ex: Exchange, cap: int, done: asyncio.Future[None]):
        self.sink = sink
        self.ex = ex
        self.cap = cap
        self.done = done
        self.error: BaseException | None = None
        self.window: asyncio.Event | None = None  # created only when a body waits for credit


class _Connection(SlicedProtocol):
    """One HTTP/2 connection: h2 state, the open streams, and the socket."""

    def __init__(self, pool: H2Transport) -> None:
        super().__init__(pool.limits.slice_bytes)  # reads reach h2 a slice per loop iteration
        self.pool = pool
        cfg = h2.config.H2Configuration(client_side=True, header_encoding=None)
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.streams: dict[int, _Stream] = {}
        self.unacked: dict[int, int] = {}  # stream id -> bytes received, not yet acknowledged
        self.unacked_total = 0
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.settings = loop.create_future()  # first SETTINGS from the server
        self.lost = loop.create_future()  # the socket is closed
        self.usable = True  # false after GOAWAY, a connection error, or close
        self.can_write = asyncio.Event()
        self.can_write.set()

    # -- capacity
    def has_room(self) -> bool:
        return self.usable and len(self.streams) < self.h2.remote_settings.max_concurrent_streams

    # -- asyncio plumbing
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.h2.initiate_connection()
        # MAX_FRAME_SIZE stays at 16 KiB: h2 applies a larger one only from its next read, so
        # big frames that share a read with the SETTINGS ACK would be rejected.
        self.h2.update_settings(
            {
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
            }
        )
        self.h2.increment_flow_control_window(CONNECTION_WINDOW - 65535)
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._hand_on_rest(lambda: self.transport is not None)  # frames read before the close
        self.usable = False
        if not self.lost.done():
            self.lost.set_result(None)
        self.transport = None
        reason = f": {exc}" if exc else ""
        self.fail_all(base.ConnectionReset(f"connection closed by the server{reason}"))
        if not self.settings.done():
            self.settings.set_exception(
                base.ConnectError(f"cannot connect to {self.pool.origin.address}: closed{reason}")
            )
        self.pool._forget(self)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            try:
                self.h2.close_connection()
                self.flush()
            except h2.exceptions.ProtocolError:
                pass
            self.transport.close()

    # -- streams
    def finish(self, sid: int, error: BaseException | None, t: int) -> None:
        self._ack(sid)  # the connection's window gets back what the stream took
        st = self.streams.pop(sid, None)
        if st is None:
            return
        st.ex.t_end = t
        st.error = error
        if not st.done.done():
            st.done.set_result(None)
        if st.window is not None:
            st.window.set()
        self.pool._slot_freed()

    def fail_all(self, error: base.TransportError) -> None:
        t = now_ns()
        for sid in list(self.streams):
            self.finish(sid, error, t)

    def cancel_stream(self, sid: int) -> None:
        """Reset a stream we gave up on; the server may stop work on it."""
        if sid in self.streams and self.transport is not None:
            try:
                self.h2.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                self.flush()
            except h2.exceptions.ProtocolError:
                pass  # already closed on h2's side

    def _received(self, data: bytes, t: int) -> None:
        """Hand h2 what was read at `t` (one stamp for every event in it)."""
        try:
            events = self.h2.receive_data(data)
            _check_partial_frame(self.h2)
        except h2.exceptions.ProtocolError as e:
            hint = " (the server speaks HTTP/1.1, not HTTP/2)" if b"HTTP/1." in data[:16] else ""
            self.fail_all(base.ProtocolViolation(f"invalid HTTP/2 from the server: {e}{hint}"))
            if not self.settings.done():
                self.settings.set_exception(
                    base.ConnectError(f"{self.pool.origin.address} does not speak HTTP/2{hint}")
                )
            self.close()
            return
        for ev in events:
            self._event(ev, t)
        self.flush()  # window updates, settings acks, ping acks

    def _event(self, ev: h2.events.Event, t: int) -> None:
        if isinstance(ev, h2.events.DataReceived):
            st = self.streams.get(ev.stream_id)
            if st is None:
                self._owe(ev.stream_id, ev.flow_controlled_length)
                self._ack(ev.stream_id)
                return
            self._owe(ev.stream_id, ev.flow_controlled_length)
            st.ex.bytes_in += len(ev.data)
            if st.ex.bytes_in > st.cap:
                self.cancel_stream(ev.stream_id)
                too_large = base.BodyTooLarge(f"response body passed {st.cap} bytes")
                self.finish(ev.stream_id, too_large, t)
                return
            self._call(ev.stream_id, st, st.sink.on_data, ev.data, t)
        elif isinstance(ev, h2.events.ResponseReceived):
            st = self.streams.get(ev.stream_id)
            if st is None:
                return
            status = -1
            headers: dict[str, str] = {}
            for k, v in ev.headers:
                if k == b":status":
                    status = _status(v)
                elif not k.startswith(b":"):
                    headers[k.decode("latin-1").lower()] = v.decode("latin-1")
            if status < 0:  # h2 leaves :status unchecked; one that is no code ends the stream
                self.cancel_stream(ev.stream_id)
                raw = dict(ev.headers).get(b":status", b"")[:20]
                bad = base.ProtocolViolation(f"invalid HTTP/2 :status {raw.decode('latin-1')!r}")
                self.finish(ev.stream_id, bad, t)
                return
            self._call(ev.stream_id, st, st.sink.on_headers, status, headers, t)
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.get(ev.stream_id)
            if st is not None and self._call(ev.stream_id, st, st.sink.on_end, t):
                self.finish(ev.stream_id, None, t)
        elif isinstance(ev, h2.events.StreamReset):
            code = _code_name(ev.error_code)
            reset = base.ConnectionReset(f"stream reset by the server ({code})")
            self.finish(ev.stream_id, reset, t)
        elif isinstance(ev, h2.events.WindowUpdated):
            sid = ev.stream_id
            for st in self.streams.values() if sid == 0 else [self.streams.get(sid)]:
                if st is not None and st.window is not None:
                    st.window.set()
        elif isinstance(ev, h2.events.RemoteSettingsChanged):
            if not self.settings.done():
                self.settings.set_result(None)
            self.pool._slot_freed()  # max_concurrent_streams may have grown
        elif isinstance(ev, h2.events.ConnectionTerminated):
            # GOAWAY: streams above last_stream_id were never processed; the rest may finish.
            self.usable = False
            code = _code_name(ev.error_code)
            last = ev.last_stream_id if ev.last_stream_id is not None else 0
            for sid in [s for s in self.streams if s > last]:
                self.finish(sid, base.ConnectionReset(f"GOAWAY ({code}): stream not processed"), t)
            if not self.streams and self.transport is not None:
                self.transport.close()

    # -- flow control
    def _owe(self, sid: int, n: int) -> None:
        """`n` bytes of stream `sid` received: acknowledged later, in one go (module doc)."""
        if not n:
            return
        owed = self.unacked.get(sid, 0) + n
        self.unacked[sid] = owed
        self.unacked_total += n
        if owed >= ACK_EVERY:
            self._ack(sid)
        elif self.unacked_total >= ACK_ALL_AT:
            for other in list(self.unacked):
                self._ack(other)

    def _ack(self, sid: int) -> None:
        owed = self.unacked.pop(sid, 0)
        if not owed:
            return
        self.unacked_total -= owed
        # A closed stream's bytes still count for the connection's window; a closed
        # connection has nothing to give back.
        with contextlib.suppress(h2.exceptions.ProtocolError):
            self.h2.acknowledge_received_data(owed, sid)

    def _call(self, sid: int, st: _Stream, fn: object, *args: object) -> bool:
        """Run a sink callback; a sink that raises ends its own stream, not the connection."""
        try:
            fn(*args)  # type: ignore[operator]
        except Exception as e:
            self.cancel_stream(sid)
            self.finish(sid, e, args[-1])  # type: ignore[arg-type]
            return False
        return True

    async def send_body(self, sid: int, body: bytes) -> None:
        view = memoryview(body)
        while view:
            st = self.streams.get(sid)
            if st is None or self.transport is None:
                return  # the stream already ended (reset, error); send() reports why
            room = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
            if room <= 0:
                st.window = st.window or asyncio.Event()
                st.window.clear()
                await st.window.wait()
                continue
            await self.can_write.wait()
            piece, view = view[:room], view[room:]
            self.h2.send_data(sid, bytes(piece), end_stream=not view)
            self.flush()


def _check_partial_frame(conn: h2.connection.H2Connection) -> None:
    """Reject an oversized frame header at once. h2 checks a frame's length only after the
    whole frame has arrived, so garbage (or an HTTP/1.1 reply to our preface, whose first bytes
    read as a ~4.7 MB frame) would otherwise wait for bytes that never come."""
    buf = getattr(conn.incoming_buffer, "_data", b"")
    if len(buf) >= 3:
        length = int.from_bytes(buf[:3], "big")
        limit = conn.max_inbound_frame_size
        if length > limit:
            raise h2.exceptions.FrameTooLargeError(f"frame header announces {length} bytes")


def _status(value: bytes) -> int:
    """A `:status` value as its code (100-599); -1 for anything else."""
    if len(value) == 3 and value.isdigit() and 100 <= int(value) <= 599:
        return int(value)
    return -1


def _code_name(code: object) -> str:
    return getattr(code, "name", str(code))


class H2Transport(PoolBase):
    """HTTP/2 pool to one origin: one connection opened up front (its streams multiplex),
    more when streams run out (up to `limits.max_connections`). Never retries."""

    http_version = "2"

    def _setup(self) -> None:
        self._conns: list[_Connection] = []
        self._opening = 0
        self._room: asyncio.Event | None = None
        self._closed = False
        self._base_headers: list[tuple[bytes, bytes]] = []
        self.opened = 0  # connections opened over the transport's life (for tests and reports)

    async def _open(self) -> None:
        self._closed = False
        self._room = asyncio.Event()
        o = self.origin
        self._base_headers = [
            (b":scheme", o.scheme.encode()),
            (b":authority", o.authority.encode("idna")),
        ]
        await self._connect()

    async def _connect(self) -> _Connection:
        o = self.origin
        ssl_ctx = client_ssl_context(self.insecure, ["h2"]) if o.tls else None
        timeout = self.limits.connect_timeout_s
        self._opening += 1
        try:
            conn = await open_connection(lambda: _Connection(self), o, timeout, ssl_ctx=ssl_ctx)
            if ssl_ctx is not None:
                alpn = conn.transport.get_extra_info("ssl_object").selected_alpn_protocol()  # type: ignore[union-attr]
                if alpn != "h2":
                    conn.close()
                    raise base.ConnectError(f"{o.address} did not agree to HTTP/2 (ALPN: {alpn})")
            self.opened += 1
            try:
                # The server's first SETTINGS proves it speaks HTTP/2 and sets the stream limit.
                await asyncio.wait_for(asyncio.shield(conn.settings), timeout)
            except asyncio.TimeoutError:
                conn.close()
                raise base.ConnectError(
                    f"{o.address} sent no HTTP/2 SETTINGS within {timeout:g} s"
                ) from None
            self._conns.append(conn)  # only now: its stream limit is known
            return conn
        finally:
            self._opening -= 1
            self._slot_freed()  # waiters re-check: the new connection, or a failed open

    def _forget(self, conn: _Connection) -> None:
        if conn in self._conns:
            self._conns.remove(conn)
        self._slot_freed()

    def _slot_freed(self) -> None:
        if self._room is not None:
            self._room.set()

    async def _pick(self, ex: Exchange) -> _Connection:
        """The least busy connection with a free stream; open one, or wait, if none (the
        wait is `ex.connection_wait`)."""
        while True:
            best = None
            for c in self._conns:
                if c.has_room() and (best is None or len(c.streams) < len(best.streams)):
                    best = c
            if best is not None:
                return best
            if self._closed:
                raise base.ConnectionReset("transport closed")
            # One connection opening at a time: the streams waiting meanwhile will fit on it.
            if self._opening == 0 and len(self._conns) < self.limits.max_connections:
                return await self._connect()
            assert self._room is not None
            self._room.clear()
            asked = now_ns()
            try:
                await self._room.wait()
            finally:
                ex.connection_wait += now_ns() - asked

    async def send(
        self, request: HttpRequest, sink: ResponseSink, timeout_s: float, ex: Exchange
    ) -> Exchange:
        if self._room is None:
            raise RuntimeError("H2Transport.send() before open()")
        ex.http_version = "2"
        conn: _Connection | None = None
        sid = 0
        headers = [
            (b":method", request.method.encode()),
            *self._base_headers,
            (b":path", (self.origin.prefix + request.path).encode()),
        ]
        for k, v in request.headers:
            lk = k.lower()
            if lk not in _DROP:
                headers.append((lk.encode("latin-1"), v.encode("latin-1")))
        body = request.body
        if body:
            headers.append((b"content-length", str(len(body)).encode()))
        try:
            with Deadline(timeout_s, self.timeouts):
                conn = await self._pick(ex)
                done = asyncio.get_running_loop().create_future()
                sid = conn.h2.get_next_available_stream_id()
                st = _Stream(sink, ex, self.limits.max_body_bytes, done)
                conn.streams[sid] = st
                ex.t_send = now_ns()
                conn.h2.send_headers(sid, headers, end_stream=not body)
                conn.flush()
                if body:
                    await conn.send_body(sid, body)
                await done
        except base.TransportError as e:
            ex.t_end = now_ns()
            ex.error = e
            if conn is not None and sid in conn.streams:
                conn.cancel_stream(sid)  # RST_STREAM(CANCEL): tell the server we gave up
                conn.streams.pop(sid, None)
                self._slot_freed()
            return ex
        except h2.exceptions.ProtocolError as e:
            # e.g. the connection hit GOAWAY between _pick and send_headers
            ex.t_end = now_ns()
            ex.error = base.ConnectionReset(f"HTTP/2 connection unusable: {e}")
            if conn is not None:
                conn.streams.pop(sid, None)
            return ex
        if st.error is not None:
            if not isinstance(st.error, base.TransportError):
                raise st.error  # the sink raised: not a transport failure, the caller's bug
            ex.error = st.error
        return ex

    async def close(self) -> None:
        self._closed = True
        conns, self._conns = list(self._conns), []
        for c in conns:
            c.close()
        self._slot_freed()
        # A TLS close waits for the peer's close_notify; give it a moment, then cut.
        pending = [c.lost for c in conns if not c.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        for c in conns:
            if not c.lost.done() and c.transport is not None:
                c.transport.abort()
        await asyncio.sleep(0)  # let abort's connection_lost callbacks run
