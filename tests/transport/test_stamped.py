"""Reads stamped by the kernel (zqbench/transport/stamped.py): a stream event keeps the time it
arrived however late the event loop reads it, and the transport keeps the loop's contract."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from tests.servers import ProgrammedServer, RecordingSink
from tests.transport.util import get, make, run
from zqbench.transport import _common, stamped
from zqbench.transport.base import Exchange

BLOCK_S = 0.060  # the loop is held this long from just after the request goes out
# The first event arrives while the loop is held, the second well after it ends.
PATH = "/sse?n=2&every=150&first=10&head=2"


def _first_event_error_ms(kind: str, url: str, rid: str, server: ProgrammedServer) -> float:
    """How much later than the server wrote it the client stamped the first event, in ms,
    with the event loop held (time.sleep, as a long collection or parse would) as it came."""

    async def go() -> tuple[Exchange, RecordingSink]:
        tr = make(kind, url, warm_connections=1)
        await tr.open()
        try:
            sink = RecordingSink()
            asyncio.get_running_loop().call_later(0.001, time.sleep, BLOCK_S)
            ex = await tr.send(get(PATH, rid), sink, 10, Exchange())
            return ex, sink
        finally:
            await tr.close()

    ex, sink = run(go)
    assert ex.error is None
    truth = server.truth(rid)
    assert truth is not None and truth["outcome"] == "ok"
    first_end = sink.body.find(b"\n\n") + 2
    return (sink.time_of_byte(first_end - 1) - truth["t_chunks"][0]) / 1e6


@pytest.mark.parametrize("kind", ["h1", "h2"])
def test_an_event_read_late_keeps_its_arrival_time(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    """The first event lands 10 ms after the request, inside a 60 ms hold of the loop: its
    stamp is the kernel's arrival time (within 5 ms of the server's write even on a busy
    machine), not the end of the hold 50 ms later."""
    error_ms = _first_event_error_ms(
        kind, programmed_server.url, f"kstamp-{kind}", programmed_server
    )
    assert -1.0 < error_ms < 5.0


def test_the_loop_transport_stamps_when_it_reads(
    programmed_server: ProgrammedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with the loop's own transport: the stamp is the read, after the hold. (So the
    test above can tell the two apart.)"""
    monkeypatch.setattr(_common, "STAMPED_READS", False)
    error_ms = _first_event_error_ms("h1", programmed_server.url, "wakeup-h1", programmed_server)
    assert error_ms > 30.0


def test_a_stamp_converts_to_the_perf_counter_clock() -> None:
    """A loopback read's stamp, converted, lies between the write and the read."""

    async def go() -> tuple[int, int, int]:
        assert await stamped.kernel_stamps_ready()
        with socket.create_server(("127.0.0.1", 0)) as listener:
            a = socket.create_connection(listener.getsockname())
            b, _ = listener.accept()
            with a, b:
                assert stamped.stamps_supported(a)
                before = time.perf_counter_ns()
                b.send(b"x")
                time.sleep(0.02)
                _, anc, _, _ = a.recvmsg(16, 64)
                now = time.perf_counter_ns()
                return before, stamped.CLOCK.to_perf(anc, now), now

    before, t, now = run(go)
    assert before <= t <= now - 15_000_000  # stamped at the write, 20 ms before the read


def test_a_read_without_a_stamp_is_stamped_when_read() -> None:
    assert stamped.CLOCK.to_perf([], 123_456) == 123_456


class _Peer(asyncio.Protocol):
    """Records what the transport hands it."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def data_received_at(self, data: bytes, t: int) -> None:
        self.data += data

    def eof_received(self) -> bool:
        self.eof = True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set_result(exc)


async def _pair() -> tuple[stamped.StampedTransport, _Peer, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    with listener:
        sock = socket.create_connection(listener.getsockname())
        other, _ = listener.accept()
    sock.setblocking(False)
    peer = _Peer()
    return stamped.StampedTransport(asyncio.get_running_loop(), sock, peer), peer, other


def test_a_large_write_goes_out_whole_then_close_waits_for_it() -> None:
    """A write the socket cannot take at once is buffered and finished by the writer
    callback; close() lets it drain before the connection is lost."""
    payload = bytes(range(256)) * 40_000  # 10 MB: far more than the socket buffers

    async def go() -> tuple[bytes, Exception | None, bool]:
        tr, peer, other = await _pair()
        tr.write(payload)
        assert tr.get_write_buffer_size() > 0
        tr.close()
        assert tr.is_closing()
        got = bytearray()
        other.setblocking(False)
        loop = asyncio.get_running_loop()
        with other:
            while len(got) < len(payload):
                got += await loop.sock_recv(other, 1 << 20)
            exc = await asyncio.wait_for(peer.lost, 5)
        return bytes(got), exc, tr.get_write_buffer_size() == 0

    got, exc, drained = run(go)
    assert got == payload and exc is None and drained


def test_the_peer_closing_is_an_eof_then_a_clean_loss() -> None:
    async def go() -> tuple[bytes, bool, Exception | None]:
        _, peer, other = await _pair()
        other.sendall(b"last words")
        other.close()
        exc = await asyncio.wait_for(peer.lost, 5)
        return bytes(peer.data), peer.eof, exc

    assert run(go) == (b"last words", True, None)


def test_a_reset_is_a_loss_with_its_error() -> None:
    async def go() -> Exception | None:
        _, peer, other = await _pair()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        other.close()  # linger 0: an RST
        return await asyncio.wait_for(peer.lost, 5)

    assert isinstance(run(go), ConnectionResetError)


def test_abort_loses_the_connection_once_and_drops_what_was_buffered() -> None:
    async def go() -> tuple[Exception | None, int, bool]:
        tr, peer, other = await _pair()
        with other:
            tr.write(b"x" * 10_000_000)
            tr.abort()
            tr.abort()
            tr.write(b"ignored")
            exc = await asyncio.wait_for(peer.lost, 5)
            await asyncio.sleep(0.01)
        return exc, tr.get_write_buffer_size(), tr.get_extra_info("socket").fileno() == -1

    assert run(go) == (None, 0, True)


def test_paused_reading_holds_bytes_in_the_socket() -> None:
    async def go() -> tuple[bytes, bytes]:
        tr, peer, other = await _pair()
        with other:
            tr.pause_reading()
            other.sendall(b"held")
            await asyncio.sleep(0.05)
            while_paused = bytes(peer.data)
            tr.resume_reading()
            for _ in range(100):
                if peer.data:
                    break
                await asyncio.sleep(0.01)
            tr.abort()
        return while_paused, bytes(peer.data)

    assert run(go) == (b"", b"held")
