"""A large response reaches the sink in slices, with the event loop running between them.

The dispatcher shares the event loop with the responses. A socket read is up to 256 KiB
(uvloop reads a ready socket up to 32 times in one go), and parsing that much SSE costs
milliseconds; so every transport hands at most `PoolLimits.slice_bytes` to the sink per
loop iteration, pausing its reads meanwhile. Asserted structurally: a ticker task counts
loop iterations, and no iteration sees more than one slice, whatever the machine's speed.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from itertools import pairwise

import pytest

from tests.servers import ProgrammedServer, RecordingSink
from tests.transport.util import KINDS, get, make, run
from zqbench.transport.base import Exchange
from zqbench.transport.raw_h1 import _Conn

SLICE = 16 * 1024


class TickSink(RecordingSink):
    """Records, with each piece of body, how many loop iterations had run."""

    def __init__(self, ticks: list[int]) -> None:
        super().__init__()
        self.ticks = ticks
        self.per_tick: dict[int, int] = defaultdict(int)

    def on_data(self, data: bytes, t_ns: int) -> None:
        super().on_data(data, t_ns)
        self.per_tick[self.ticks[0]] += len(data)


async def _ticker(ticks: list[int]) -> None:
    while True:
        ticks[0] += 1
        await asyncio.sleep(0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_large_body_reaches_the_sink_a_slice_per_loop_iteration(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    size = 3_000_000

    async def go() -> tuple[Exchange, TickSink]:
        tr = make(kind, programmed_server.url, warm_connections=1, slice_bytes=SLICE)
        await tr.open()
        ticks = [0]
        ticker = asyncio.get_running_loop().create_task(_ticker(ticks))
        try:
            sink = TickSink(ticks)
            ex = await tr.send(get(f"/big?bytes={size}"), sink, 20, Exchange())
            return ex, sink
        finally:
            ticker.cancel()
            await tr.close()

    ex, sink = run(go)
    assert ex.error is None and len(sink.body) == size == ex.bytes_in
    # The ticker ran between any two slices: no loop iteration handed on more than one.
    # HTTP/2 hands on a DATA frame (16 KiB at most) once it is whole, so a slice of the
    # socket's bytes may complete a frame begun in the slice before.
    bound = SLICE + (16 * 1024 if kind == "h2" else 0)
    assert max(len(d) for _, d in sink.chunks) <= bound
    assert max(sink.per_tick.values()) <= bound
    assert len(sink.per_tick) >= size // SLICE


class _PausableTransport:
    """What `_Conn` needs of an asyncio transport, reads paused or not."""

    def __init__(self) -> None:
        self.paused = False
        self.closing = False

    def write(self, data: bytes) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True


def _conn_with_request() -> tuple[_Conn, _PausableTransport, RecordingSink, asyncio.Future[None]]:
    conn = _Conn(1 << 30, lambda c: None, SLICE)
    transport = _PausableTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    sink = RecordingSink()
    waiter = conn.request(b"GET / HTTP/1.1\r\n\r\n", False, sink, Exchange())
    return conn, transport, sink, waiter


def test_raw_h1_pauses_reading_until_a_large_read_is_handed_on() -> None:
    body = b"x" * (10 * SLICE + 5)
    read = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def go() -> None:
        conn, transport, sink, waiter = _conn_with_request()
        conn.data_received(read)
        # One slice now, reading paused; the rest one loop iteration at a time.
        assert transport.paused and len(sink.body) < SLICE
        seen = [len(sink.body)]
        while not waiter.done():
            await asyncio.sleep(0)
            seen.append(len(sink.body))
        assert sink.body == body and not transport.paused
        assert max(b - a for a, b in pairwise(seen)) <= SLICE
        assert len(sink.chunks) >= 11

    run(go)


def test_raw_h1_reads_in_one_go_share_one_slice() -> None:
    """uvloop reads a ready socket up to 32 times before the loop runs anything else: small
    reads in one go are handed on only up to a slice, the rest in later iterations."""
    piece = b"p" * (SLICE // 2 + 1)
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (4 * len(piece))

    async def go() -> None:
        conn, transport, sink, waiter = _conn_with_request()
        conn.data_received(head)
        for _ in range(4):  # four reads, no loop iteration in between
            conn.data_received(piece)
        assert len(sink.body) == len(piece) and transport.paused
        while not waiter.done():
            before = len(sink.body)
            await asyncio.sleep(0)
            assert len(sink.body) - before <= SLICE
        assert sink.body == 4 * piece and not transport.paused

    run(go)


def test_raw_h1_a_close_with_a_read_not_yet_handed_on_keeps_every_byte() -> None:
    """A body that runs to the close: the server's FIN comes while slices are pending."""
    body = b"y" * (3 * SLICE)
    read = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body

    async def go() -> None:
        conn, _, sink, waiter = _conn_with_request()
        conn.data_received(read)
        conn.connection_lost(None)  # before the loop ran the next slice
        await waiter  # complete, not reset
        assert sink.body == body and sink.t_end

    run(go)


def test_raw_h1_a_failed_response_drops_the_rest_of_its_read() -> None:
    body = b"z" * (4 * SLICE)
    read = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def go() -> None:
        conn, transport, sink, waiter = _conn_with_request()
        conn.data_received(read)
        conn.drop()  # the request's deadline, say: the connection is aborted
        for _ in range(10):
            await asyncio.sleep(0)
        assert len(sink.body) < SLICE and not waiter.done()
        assert transport.closing and not conn.backlog

    run(go)
