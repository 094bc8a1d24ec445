"""A plain-TCP asyncio transport whose reads carry the kernel's arrival time (#43).

A protocol on the loop's own transports can only stamp a read when its callback runs, and
that is as late as the event loop is busy: at 50,000 token events a second the loop works
through each tick's burst of reads for milliseconds, so a token's stamp depended on its
place in the burst and on any collection or flush before it, and the per-request ITL p99
grew by 2-4 ms of the client's own making. Here each read is one `recvmsg` on a socket with
`SO_TIMESTAMPNS`: Linux returns, with the bytes, the time its network stack received the last
of them (CLOCK_REALTIME; for TCP one stamp a call, commit 98aaa913), which is converted to
`perf_counter_ns`'s clock (CLOCK_MONOTONIC). A read of one token event is then stamped when
the event arrived, however late the loop reads it. Where a late read returns several events
at once they share the last one's stamp, as every read did before; the client-lag probe
(engines/loop_lag.py) says when the loop is that far behind.

Only plain TCP (no TLS: the bytes a TLS record decrypts to have no stamp of their own) and
only where the kernel accepts the option; elsewhere `open_connection` keeps the loop's own
transport and stamps each read when its callback runs.

The transport is the loop's contract in small: non-blocking `send` with the rest buffered
under a writer callback, reading paused and resumed by removing and adding the reader,
`close` after the buffer drains, `abort` at once, `connection_lost` called soon after either.
Protocols receive `data_received_at(data, t)`: the bytes and their stamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import sys
import time
from time import perf_counter_ns
from typing import Any, Protocol

# Linux's SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD), the same value on the architectures Python's
# wheels serve; its control message carries a `struct timespec` of native longs.
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@ll")
_unpack_timespec = _TIMESPEC.unpack_from
_SOL_SOCKET = socket.SOL_SOCKET
READ_BYTES = 64 * 1024  # one recvmsg; larger sizes cost an mmap'd buffer each call
_ANC_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
OFFSET_REFRESH_NS = 1_000_000_000  # how often the REALTIME - MONOTONIC offset is read again


class StampedProtocol(Protocol):
    """What the transport calls: asyncio.Protocol's callbacks, with reads stamped."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def data_received_at(self, data: bytes, t: int) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


class KernelClock:
    """Converts the kernel's CLOCK_REALTIME stamps to perf_counter_ns.

    The two clocks run at the same rate (NTP slews both) and differ by an offset that moves
    only when the wall clock is stepped, so the offset is read again each second; a stamp
    that lands after the read itself (a step in between) is replaced by the read's time."""

    def __init__(self) -> None:
        self.offset = 0
        self.read_at = -OFFSET_REFRESH_NS  # perf_counter_ns of the last offset reading

    def refresh(self, now: int) -> None:
        before = perf_counter_ns()
        real = time.clock_gettime_ns(time.CLOCK_REALTIME)
        after = perf_counter_ns()
        self.offset = real - (before + after) // 2
        self.read_at = now

    def to_perf(self, anc: list[tuple[int, int, bytes]], now: int) -> int:
        """The stamp of a read whose control messages are `anc`, read at `now`."""
        for level, kind, data in anc:
            if kind == SO_TIMESTAMPNS and level == _SOL_SOCKET:
                if now - self.read_at > OFFSET_REFRESH_NS:
                    self.refresh(now)
                sec, nsec = _unpack_timespec(data)
                t = sec * 1_000_000_000 + nsec - self.offset
                return t if t <= now else now
        return now  # no stamp came with it (the option was set after the bytes arrived)


CLOCK = KernelClock()


def stamps_supported(sock: socket.socket) -> bool:
    """Ask the kernel to stamp `sock`'s reads; False where it cannot (not Linux)."""
    if not sys.platform.startswith("linux") or not _ANC_BYTES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


_ready: bool | None = None  # the process's answer from `kernel_stamps_ready`
# The probe's stamped socket, kept open for the life of the process: Linux turns stamping
# off when the last socket that asked for it closes, and turning it back on is not at once.
_keeper: int | None = None  # a file descriptor: the process's exit closes it
READY_WITHIN_S = 1.0


async def kernel_stamps_ready() -> bool:
    """Whether the kernel stamps TCP reads, once it does (asked once a process).

    The first socket that asks turns stamping on for the whole kernel, but Linux does that
    from a work queue: on a loaded machine reads went unstamped for 35 ms after (the first
    250 requests of a run, each then stamped when the busy loop read it). So a loopback
    pair is tried until its read comes stamped, within READY_WITHIN_S; False if it never
    does, and the loop's own transport is used. The stamped socket stays open (`_keeper`),
    so that stamping stays on between runs and between connections."""
    global _ready
    if _ready is None:
        _ready = await _probe() if sys.platform.startswith("linux") and _ANC_BYTES else False
    return _ready


async def _probe() -> bool:
    global _keeper
    try:
        with contextlib.ExitStack() as stack:
            listener = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
            c = stack.enter_context(
                socket.create_connection(listener.getsockname(), timeout=READY_WITHIN_S)
            )
            peer = stack.enter_context(listener.accept()[0])
            if not stamps_supported(c):
                return False
            c.setblocking(False)
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline:
                peer.send(b"z")
                await asyncio.sleep(0.001)
                try:
                    _, anc, _, _ = c.recvmsg(64, _ANC_BYTES)
                except BlockingIOError:
                    continue
                if any(kind == SO_TIMESTAMPNS for _, kind, _ in anc):
                    _keeper = os.dup(c.fileno())
                    return True
    except OSError:
        pass
    return False


class StampedTransport(asyncio.Transport):
    """One connected, non-blocking TCP socket on the running loop (see the module's doc)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: StampedProtocol
    ) -> None:
        super().__init__()
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._protocol = protocol
        self._wbuf = bytearray()  # bytes `send` did not take yet
        self._reading = False
        self._closing = False  # close() or abort() called, or the connection failed
        self._lost_called = False
        protocol.connection_made(self)
        if not self._closing:
            self.resume_reading()

    # -- reading
    def _on_readable(self) -> None:
        try:
            data, anc, _, _ = self._sock.recvmsg(READ_BYTES, _ANC_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._force_close(e)
            return
        now = perf_counter_ns()
        if not data:
            self.pause_reading()
            if not self._protocol.eof_received():
                self.close()
            return
        self._protocol.data_received_at(data, CLOCK.to_perf(anc, now))

    def pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)

    def is_reading(self) -> bool:
        return self._reading

    # -- writing
    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        if self._wbuf:
            self._wbuf += data
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as e:
            self._force_close(e)
            return
        if sent < len(data):
            self._wbuf += memoryview(data)[sent:]
            self._loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            sent = self._sock.send(self._wbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._force_close(e)
            return
        del self._wbuf[:sent]
        if not self._wbuf:
            self._loop.remove_writer(self._fd)
            if self._closing:
                self._lost(None)

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return len(self._wbuf)

    # -- closing
    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Stop reading; close once what is buffered is written."""
        if self._closing:
            return
        self._closing = True
        self.pause_reading()
        if not self._wbuf:
            self._lost(None)

    def abort(self) -> None:
        self._force_close(None)

    def _force_close(self, exc: Exception | None) -> None:
        self._closing = True
        self.pause_reading()
        if self._wbuf:
            self._wbuf.clear()
            self._loop.remove_writer(self._fd)
        self._lost(exc)

    def _lost(self, exc: Exception | None) -> None:
        """Tell the protocol, once, from a later loop callback (as the loop's transports do)."""
        if not self._lost_called:
            self._lost_called = True
            self._loop.call_soon(self._call_connection_lost, exc)

    def _call_connection_lost(self, exc: Exception | None) -> None:
        try:
            self._protocol.connection_lost(exc)
        finally:
            self._sock.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self._sock
        try:
            if name == "peername":
                return self._sock.getpeername()
            if name == "sockname":
                return self._sock.getsockname()
        except OSError:
            return default
        return default
