"""A loopback HTTP/1.1 + h2c (+TLS) server with programmed latency and server-side ground truth.

Run as its own process (`python -m tests.servers.programmed --port 0`) so that neither the GIL
nor the client's event loop can shift its timing; it prints `READY <port>` when listening.
Start and stop it through `tests.servers.ProgrammedServer`.

Every time below is `time.perf_counter_ns()` (CLOCK_MONOTONIC on Linux, shared by all processes
on the host), so client stamps and server stamps compare directly. The server never sends early:
each programmed moment is an absolute deadline measured from the moment the request was fully
read (`t_recv`), and a sleep that wakes early sleeps again.

Behaviour is chosen by the path, or by an `x-program` header holding a path (so a client that
must send `POST /v1/messages` can still pick a behaviour). Times are milliseconds.

    /health                      200 "ok"
    /delay?ms=D&size=N           head + N-byte body at t_recv + D
    /sse?n=N&every=K&first=F&head=H&stall_at=I&stall_ms=S
                                 head at t_recv + H, then SSE event k at t_recv + F + k*K
                                 (+ S for k >= I), then `data: [DONE]`; HTTP/1.1 uses chunked
    /anthropic?n=N&every=K&first=F&head=H&hang_every=M
                                 an Anthropic Messages SSE stream: head at t_recv + H, then
                                 token k at t_recv + F + k*K (t_chunks[0] is the preamble);
                                 with M, every M-th request (server count) hangs after the
                                 preamble, its outcome `hang`; with refuse_every=R, every
                                 R-th request is refused at once (503, Retry-After: 1), its
                                 outcome `refused`, `in_flight` the streams then running;
                                 with lie=1 also every retry (an x-request-id with
                                 `-retry`): its Retry-After lies; with close_after=1 the
                                 connection is closed (FIN) right after the stream,
                                 although its head promised keep-alive (as llama.cpp's)
    /hang[?head=1]               never answer (or send the head, then nothing)
    /reset?bytes=N[&tcp=1]       head promising 2N bytes, N bytes, then a TCP RST
                                 (h2: RST_STREAM unless tcp=1)
    /close?bytes=N               head promising 2N bytes, N bytes, then a clean close (FIN)
    /garbage                     bytes that are not HTTP, then close
    /big?bytes=N                 an N-byte body (default 20 MB) in 64 KiB writes
    /goaway                      h2: GOAWAY saying this stream was not processed;
                                 HTTP/1.1: close without answering
    /echo                        the request body back
    /status?code=C               an empty response with that status

Control paths (not recorded): `/_truth[?id=X]` returns the ground truth as JSON,
`/_reset` clears it, `/_stall?ms=S` holds every write of every response for S ms from now.

`conns` counts accepted connections except those whose first request is a control path.
Ground truth per request, keyed by the `x-req-id` header (or a server counter):
`conn` (connection number), `proto` ("1.1" or "2"), `path`, `t_recv`, `body_bytes` (the
request body's length: 0 for a GET), `t_head` (head),
`t_chunks` (each body write), `t_end` (last byte); write stamps are taken right before the
write call, so a client can never read those bytes earlier. `outcome`: `ok`, `hang`,
`tcp_reset`, `stream_reset`, `closed`, `garbage`, `goaway`, or `client_reset` (with
`t_client_reset`) when an h2 client sent RST_STREAM.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import json
import socket
import ssl
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# A 16 MiB frame length (too large for any HTTP/2 peer) and no HTTP/1 status line either.
GARBAGE = b"\xff\xff\xff\x00\x00THIS IS NOT HTTP\r\n\r\n\x00garbage garbage\r\n"
now = time.perf_counter_ns

ANTHROPIC_PREAMBLE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_t","type":'
    b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":16,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)
ANTHROPIC_DELTA = (
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"x"}}\n\n'
)
ANTHROPIC_END = (
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens",'
    b'"stop_sequence":null},"usage":{"output_tokens":%d}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


ANTHROPIC_OVERLOADED = (
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
)


class State:
    """Process-wide server state: ground truth and counters."""

    def __init__(self) -> None:
        self.truth: dict[str, dict[str, object]] = {}
        self.conns = 0
        self.requests = 0
        self.streaming = 0  # /anthropic streams between their start and their end
        self.stall_until = 0

    def snapshot(self, req_id: str | None) -> dict[str, object]:
        if req_id is not None:
            return {"request": self.truth.get(req_id)}
        return {"conns": self.conns, "requests": self.requests, "truth": self.truth}


STATE = State()


async def sleep_until(t_ns: int) -> None:
    """Sleep to an absolute perf_counter_ns deadline; never return early (timers may wake early)."""
    while True:
        left = t_ns - now()
        if left <= 0:
            return
        await asyncio.sleep(left / 1e9)


class Responder(abc.ABC):
    """What a handler may do to the response, whatever the protocol underneath."""

    proto = "?"

    @abc.abstractmethod
    async def head(
        self, status: int, headers: list[tuple[str, str]], length: int | None
    ) -> None: ...

    @abc.abstractmethod
    async def data(self, chunk: bytes) -> None: ...

    @abc.abstractmethod
    async def end(self) -> None: ...

    @abc.abstractmethod
    def reset_stream(self) -> None: ...

    @abc.abstractmethod
    def abort_tcp(self) -> None: ...

    @abc.abstractmethod
    def close_tcp(self) -> None: ...

    @abc.abstractmethod
    def write_raw(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def goaway(self) -> None: ...


def _int(q: dict[str, list[str]], name: str, default: int) -> int:
    return int(float(q[name][0])) if name in q else default


def _ms(q: dict[str, list[str]], name: str, default: float) -> int:
    return int(float(q[name][0]) * 1e6) if name in q else int(default * 1e6)


async def handle(r: Responder, target: str, req_id: str, body: bytes, t_recv: int, conn: Conn):
    """Serve one request per its program and record the ground truth."""
    url = urlsplit(target)
    path, q = url.path, parse_qs(url.query)
    if path.startswith("/_") and not conn.served:
        conn.served = True
        STATE.conns -= 1  # a control connection is not the client's: do not count it
    conn.served = True
    if path == "/_truth":
        out = json.dumps(STATE.snapshot(q["id"][0] if "id" in q else None)).encode()
        await r.head(200, [("content-type", "application/json")], len(out))
        await r.data(out)
        await r.end()
        return
    if path == "/_reset":
        STATE.truth.clear()
        STATE.conns = STATE.requests = 0
        await r.head(200, [], 0)
        await r.end()
        return
    if path == "/_stall":
        STATE.stall_until = now() + _ms(q, "ms", 0)
        await r.head(200, [], 0)
        await r.end()
        return

    STATE.requests += 1
    rec: dict[str, object] = {
        "conn": conn.id,
        "proto": r.proto,
        "path": target,
        "t_recv": t_recv,
        "body_bytes": len(body),  # 0: a GET (a health check, a listing); else a request's JSON
        "t_head": None,
        "t_chunks": [],
        "t_end": None,
        "outcome": "pending",
    }
    STATE.truth[req_id] = rec
    chunks: list[int] = rec["t_chunks"]  # type: ignore[assignment]

    async def head(status: int, length: int | None, ctype: str = "text/plain") -> None:
        await sleep_until(STATE.stall_until)
        # Stamped just before the write: a reader cannot see the bytes earlier than this.
        rec["t_head"] = now()
        await r.head(status, [("content-type", ctype), ("x-req-id", req_id)], length)

    async def data(chunk: bytes) -> None:
        await sleep_until(STATE.stall_until)
        chunks.append(now())
        await r.data(chunk)

    async def end() -> None:
        await r.end()
        rec["t_end"] = now()
        rec["outcome"] = "ok"

    if path == "/health":
        await head(200, 3)
        await data(b"ok\n")
        await end()
    elif path == "/delay":
        size = _int(q, "size", 2)
        await sleep_until(t_recv + _ms(q, "ms", 0))
        await head(200, size)
        if size:
            await data(b"x" * size)
        await end()
    elif path == "/sse":
        n, every, first = _int(q, "n", 8), _ms(q, "every", 5), _ms(q, "first", 0)
        stall_at, stall = _int(q, "stall_at", -1), _ms(q, "stall_ms", 0)
        await sleep_until(t_recv + _ms(q, "head", 0))
        await head(200, None, "text/event-stream")
        for k in range(n):
            extra = stall if 0 <= stall_at <= k else 0
            await sleep_until(t_recv + first + k * every + extra)
            await data(b'data: {"i": %d}\n\n' % k)
        await data(b"data: [DONE]\n\n")
        await end()
    elif path == "/anthropic":
        # An Anthropic Messages stream: preamble right after the head, content token k at
        # t_recv + first + k*every. Truth: t_chunks[0] is the preamble, t_chunks[1 + k] token k.
        n, every, first = _int(q, "n", 8), _ms(q, "every", 5), _ms(q, "first", 0)
        refuse_every = _int(q, "refuse_every", 0)
        lie = "lie" in q and "-retry" in req_id  # a try sent when Retry-After said: refused
        if refuse_every and (STATE.requests % refuse_every == 0 or lie):
            # Refused at once, whatever is in flight: the truth keeps how much was.
            rec["outcome"], rec["in_flight"] = "refused", STATE.streaming
            rec["t_head"] = now()
            headers = [("content-type", "application/json"), ("x-req-id", req_id)]
            await r.head(503, [*headers, ("retry-after", "1")], len(ANTHROPIC_OVERLOADED))
            await r.data(ANTHROPIC_OVERLOADED)
            await r.end()
            rec["t_end"] = now()
            return
        STATE.streaming += 1
        try:
            await sleep_until(t_recv + _ms(q, "head", 0))
            await head(200, None, "text/event-stream")
            await data(ANTHROPIC_PREAMBLE)
            hang_every = _int(q, "hang_every", 0)
            if hang_every and STATE.requests % hang_every == 0:
                rec["outcome"] = "hang"
                await asyncio.Event().wait()  # until the connection dies, the task cancelled
            for k in range(n):
                await sleep_until(t_recv + first + k * every)
                await data(ANTHROPIC_DELTA)
            await data(ANTHROPIC_END % n)
            await end()
            if "close_after" in q:  # llama.cpp's server: the connection ends with the stream
                r.close_tcp()
        finally:
            STATE.streaming -= 1
    elif path == "/hang":
        if "head" in q:
            await head(200, None)
        rec["outcome"] = "hang"
        await asyncio.Event().wait()  # until the connection dies and the task is cancelled
    elif path in ("/reset", "/close"):
        n = _int(q, "bytes", 1000)
        await head(200, 2 * n)
        await data(b"r" * n)
        await asyncio.sleep(0.005)  # let the partial body reach the client before the cut
        rec["t_end"] = now()
        if path == "/close":
            rec["outcome"] = "closed"
            r.close_tcp()
        elif "tcp" in q or r.proto == "1.1":
            rec["outcome"] = "tcp_reset"
            r.abort_tcp()
        else:
            rec["outcome"] = "stream_reset"
            r.reset_stream()
    elif path == "/garbage":
        rec["t_end"] = now()
        rec["outcome"] = "garbage"
        r.write_raw(GARBAGE)
        r.close_tcp()
    elif path == "/big":
        n = _int(q, "bytes", 20_000_000)
        await head(200, n, "application/octet-stream")
        block = b"b" * 65536
        sent = 0
        while sent < n:
            piece = block[: min(65536, n - sent)]
            await r.data(piece)  # one stamp per write would be 300 list items; keep the last
            sent += len(piece)
        chunks.append(now())
        await end()
    elif path == "/goaway":
        rec["t_end"] = now()
        rec["outcome"] = "goaway"
        r.goaway()
    elif path == "/echo":
        await head(200, len(body), "application/octet-stream")
        if body:
            await data(body)
        await end()
    elif path == "/status":
        await head(_int(q, "code", 200), 0)
        await end()
    else:
        await head(404, 0)
        await end()


async def _quiet(coro: Awaitable[None]) -> None:
    """A client that goes away mid-response is expected here, not an error."""
    with contextlib.suppress(
        ConnectionError, h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError
    ):
        await coro


def _target_of(path: str, headers: dict[str, str]) -> str:
    return headers.get("x-program") or path


class Conn(asyncio.Protocol):
    """One accepted connection; decides HTTP/1.1 or h2 from the first bytes (or ALPN)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.mode: str | None = None
        self.h2: h2.connection.H2Connection | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.busy = False  # HTTP/1.1: one request at a time (no pipelining)
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.window: dict[int, asyncio.Event] = {}
        self.streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        self.id = 0
        self.stream_req: dict[int, str] = {}  # h2 stream id -> x-req-id
        self.served = False  # has served a request (control connections are uncounted)

    # -- asyncio plumbing
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        STATE.conns += 1
        self.id = STATE.conns
        ssl_obj = transport.get_extra_info("ssl_object")
        if ssl_obj is not None and ssl_obj.selected_alpn_protocol() == "h2":
            self._start_h2()

    def connection_lost(self, exc: Exception | None) -> None:
        for t in self.tasks:
            t.cancel()
        for ev in self.window.values():
            ev.set()
        self.can_write.set()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(_quiet(coro))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def data_received(self, data: bytes) -> None:
        t = now()
        if self.mode is None:
            self.buf += data
            if len(self.buf) < len(H2_PREFACE) and H2_PREFACE.startswith(self.buf):
                return
            if self.buf.startswith(H2_PREFACE):
                self._start_h2()
            else:
                self.mode = "1.1"
            data, self.buf = self.buf, b""
        if self.mode == "h2":
            self._h2_data(data, t)
        else:
            self.buf += data
            self._h1_parse(t)

    # -- HTTP/1.1
    def _h1_parse(self, t: int) -> None:
        if self.busy:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        if len(self.buf) < end + 4 + length:
            return
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        try:
            _method, path, _ver = head[0].split(" ", 2)
        except ValueError:
            self.transport.close()  # type: ignore[union-attr]
            return
        self.busy = True
        req_id = headers.get("x-req-id") or headers.get("x-request-id") or f"auto-{next_auto()}"
        r = H1Responder(self)
        self.spawn(self._h1_serve(r, _target_of(path, headers), req_id, body, t))

    async def _h1_serve(self, r: H1Responder, target: str, req_id: str, body: bytes, t: int):
        await handle(r, target, req_id, body, t, self)
        self.busy = False
        if self.buf:
            self._h1_parse(now())

    # -- HTTP/2
    def _start_h2(self) -> None:
        self.mode = "h2"
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.h2.initiate_connection()
        self.h2.increment_flow_control_window(2**30)
        self.flush()

    def flush(self) -> None:
        out = self.h2.data_to_send() if self.h2 else b""
        if out and self.transport and not self.transport.is_closing():
            self.transport.write(out)

    def _h2_data(self, data: bytes, t: int) -> None:
        assert self.h2 is not None
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()  # type: ignore[union-attr]
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                self.streams[ev.stream_id] = (dict(ev.headers), bytearray())
                self.window[ev.stream_id] = asyncio.Event()
                if ev.stream_ended:
                    self._h2_request(ev.stream_id, t)
            elif isinstance(ev, h2.events.DataReceived):
                if ev.stream_id in self.streams:
                    self.streams[ev.stream_id][1].extend(ev.data)
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                if ev.stream_id in self.streams:
                    self._h2_request(ev.stream_id, t)
            elif isinstance(ev, h2.events.WindowUpdated):
                targets = (
                    self.window.values() if ev.stream_id == 0 else [self.window.get(ev.stream_id)]
                )
                for w in targets:
                    if w is not None:
                        w.set()
            elif isinstance(ev, h2.events.StreamReset):
                req_id = self.stream_req.pop(ev.stream_id, None)
                if req_id in STATE.truth:
                    STATE.truth[req_id]["outcome"] = "client_reset"
                    STATE.truth[req_id]["t_client_reset"] = t
                w = self.window.pop(ev.stream_id, None)
                if w is not None:
                    w.set()
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.transport.close()  # type: ignore[union-attr]
        self.flush()

    def _h2_request(self, sid: int, t: int) -> None:
        headers, body = self.streams.pop(sid)
        req_id = headers.get("x-req-id") or headers.get("x-request-id") or f"auto-{next_auto()}"
        self.stream_req[sid] = req_id
        r = H2Responder(self, sid)
        self.spawn(handle(r, _target_of(headers[":path"], headers), req_id, bytes(body), t, self))


_auto = 0


def next_auto() -> int:
    global _auto
    _auto += 1
    return _auto


class H1Responder(Responder):
    proto = "1.1"

    def __init__(self, conn: Conn) -> None:
        self.c = conn
        self.chunked = False

    def _write(self, data: bytes) -> None:
        t = self.c.transport
        if t is None or t.is_closing():
            raise ConnectionResetError("client went away")
        t.write(data)

    async def head(self, status: int, headers: list[tuple[str, str]], length: int | None) -> None:
        lines = [f"HTTP/1.1 {status} X"]
        lines += [f"{k}: {v}" for k, v in headers]
        if length is None:
            self.chunked = True
            lines.append("transfer-encoding: chunked")
        else:
            lines.append(f"content-length: {length}")
        self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def data(self, chunk: bytes) -> None:
        await self.c.can_write.wait()
        self._write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if self.chunked else chunk)

    async def end(self) -> None:
        if self.chunked:
            self._write(b"0\r\n\r\n")

    def abort_tcp(self) -> None:
        sock = self.c.transport.get_extra_info("socket")  # type: ignore[union-attr]
        # SO_LINGER 0: close() sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.c.transport.abort()  # type: ignore[union-attr]

    reset_stream = abort_tcp

    def close_tcp(self) -> None:
        self.c.transport.close()  # type: ignore[union-attr]

    def write_raw(self, data: bytes) -> None:
        self._write(data)

    def goaway(self) -> None:
        self.close_tcp()


class H2Responder(Responder):
    proto = "2"

    def __init__(self, conn: Conn, sid: int) -> None:
        self.c = conn
        self.sid = sid

    async def head(self, status: int, headers: list[tuple[str, str]], length: int | None) -> None:
        hs = [(":status", str(status)), *headers]
        if length is not None:
            hs.append(("content-length", str(length)))
        self.c.h2.send_headers(self.sid, hs)  # type: ignore[union-attr]
        self.c.flush()

    async def data(self, chunk: bytes) -> None:
        conn = self.c.h2
        assert conn is not None
        view = memoryview(chunk)
        while view:
            if self.c.transport is None or self.c.transport.is_closing():
                raise ConnectionResetError("client went away")
            ev = self.c.window.get(self.sid)
            if ev is None:
                raise ConnectionResetError("stream reset by the client")
            room = min(conn.local_flow_control_window(self.sid), conn.max_outbound_frame_size)
            if room <= 0:
                ev.clear()
                await ev.wait()
                continue
            await self.c.can_write.wait()
            conn.send_data(self.sid, bytes(view[:room]))
            self.c.flush()
            view = view[room:]

    async def end(self) -> None:
        self.c.h2.end_stream(self.sid)  # type: ignore[union-attr]
        self.c.window.pop(self.sid, None)
        self.c.stream_req.pop(self.sid, None)
        self.c.flush()

    def reset_stream(self) -> None:
        self.c.h2.reset_stream(self.sid, h2.errors.ErrorCodes.INTERNAL_ERROR)  # type: ignore[union-attr]
        self.c.window.pop(self.sid, None)
        self.c.flush()

    def abort_tcp(self) -> None:
        H1Responder.abort_tcp(self)  # type: ignore[arg-type]

    def close_tcp(self) -> None:
        self.c.transport.close()  # type: ignore[union-attr]

    def write_raw(self, data: bytes) -> None:
        self.c.transport.write(data)  # type: ignore[union-attr]

    def goaway(self) -> None:
        self.c.h2.close_connection(last_stream_id=max(0, self.sid - 2))  # type: ignore[union-attr]
        self.c.flush()


async def serve(port: int, certfile: str | None, keyfile: str | None) -> None:
    ctx = None
    if certfile:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(certfile, keyfile)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Conn, "127.0.0.1", port, ssl=ctx, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"READY {port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--no-uvloop", action="store_true")
    args = ap.parse_args(argv)
    runner: Callable[..., object] = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            pass
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(args.port, args.cert, args.key))


if __name__ == "__main__":
    main()
