"""`SlicedProtocol`: an asyncio Protocol whose reads are handed on a slice per loop iteration.

The load's dispatcher shares the event loop with the responses. A socket read is up to
256 KiB, uvloop reads a ready socket up to 32 times before the loop runs anything else, and
parsing 256 KiB of small SSE events costs 1-6 ms (docs/performance.md, "Large responses").
So a protocol hands at most `slice_bytes` to its parser (`_received`) between two of its
own loop callbacks: the rest of a large read, and any read that follows in the same go,
waits in a backlog, reading paused, and goes on a slice per later loop iteration. Every
byte keeps the stamp of the read that brought it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns


class SlicedProtocol(asyncio.Protocol):
    """Subclasses set `transport` in `connection_made`, implement `_received`, and call
    `_hand_on_rest` first thing in `connection_lost`."""

    transport: asyncio.Transport | None

    def __init__(self, slice_bytes: int) -> None:
        self.slice_bytes = slice_bytes
        # Reads not yet handed on whole, each with its stamp, and the offset of the next
        # slice in the first one. Reading is paused while any is left.
        self.backlog: deque[tuple[bytes, int]] = deque()
        self.offset = 0
        self.handed = 0  # bytes handed on since the loop last ran a slice of ours

    def _received(self, data: bytes, t: int) -> None:
        """Parse `data`, read at `t`."""
        raise NotImplementedError

    def data_received(self, data: bytes) -> None:
        """A read of the loop's own transport, stamped now. That transport may read the
        socket again and again in one go, so what it handed on since our last slice counts."""
        t = perf_counter_ns()
        if self.backlog:
            self.backlog.append((data, t))  # read although paused (a loop reading ahead)
            return
        self.handed += len(data)
        if self.handed <= self.slice_bytes or self.transport is None:
            self._received(data, t)
            return
        self._defer(data, t, first_now=self.handed == len(data))

    def data_received_at(self, data: bytes, t: int) -> None:
        """A read stamped `t` by a StampedTransport, which reads once a loop callback: only a
        read larger than a slice waits (a count across reads paused the connection every
        16 KiB of a stream, two epoll_ctl calls each time, #43)."""
        if self.backlog:
            self.backlog.append((data, t))
            return
        if len(data) <= self.slice_bytes or self.transport is None:
            self._received(data, t)
            return
        self.handed = len(data)
        self._defer(data, t, first_now=True)

    def _defer(self, data: bytes, t: int, first_now: bool) -> None:
        """A large read, or one more read in the same go: a slice at a time from later loop
        callbacks, reading paused, so a send due meanwhile is not held up by the parsing.
        `first_now`: nothing was handed on since the loop last ran ours, so one slice now."""
        assert self.transport is not None
        self.transport.pause_reading()
        self.backlog.append((data, t))
        if first_now:
            self._next_slice()
        else:
            asyncio.get_running_loop().call_soon(self._next_slice)

    def _next_slice(self) -> None:
        """Hand on the next slice of the backlog; schedule the one after, or read again."""
        transport = self.transport
        if transport is None or transport.is_closing():
            self.backlog.clear()  # failed or dropped meanwhile: the rest is nobody's
            return
        if not self.backlog:
            return  # handed on at once by `_hand_on_rest`
        data, t = self.backlog[0]
        start = self.offset
        end = start + self.slice_bytes
        if end < len(data):
            self.offset = end
        else:
            self.backlog.popleft()
            self.offset = 0
        if self.backlog:
            asyncio.get_running_loop().call_soon(self._next_slice)
        else:
            transport.resume_reading()
        self.handed = min(end, len(data)) - start
        self._received(data[start:end], t)

    def _hand_on_rest(self, wanted: Callable[[], bool]) -> None:
        """The connection is lost: bytes read before that come first (a body that runs to the
        close ends with them), so what is left is handed on at once, while `wanted()`."""
        while self.backlog and wanted():
            data, t = self.backlog.popleft()
            offset, self.offset = self.offset, 0
            self._received(data[offset:], t)
        self.backlog.clear()
