"""HTTP/2 flow control with acknowledgements in bulk (#43): the client acknowledges what a
stream received a slice at a time and at the stream's end, not every DATA frame. A server that
keeps to the windows strictly must still be able to send a stream longer than its window and
more streams than the connection's window holds. The windows are made small here so that a
missing acknowledgement stalls the test's sends, which then time out."""

from __future__ import annotations

import asyncio
import socket
from contextlib import AbstractContextManager

import h2.config
import h2.connection
import h2.events
import pytest

from tests.transport.util import get, make, run, send, serve_in_thread
from zqbench.transport import h2_client

STREAM_WINDOW = 64 * 1024
CONNECTION_WINDOW = 256 * 1024


def _serve(sock: socket.socket, body_bytes: int) -> None:
    """One h2c connection; each request is answered with `body_bytes` bytes, never more than
    the client's windows allow: blocked, it waits for the client's WINDOW_UPDATE."""
    conn_sock, _ = sock.accept()
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    conn_sock.sendall(conn.data_to_send())
    left: dict[int, int] = {}  # stream id -> body bytes still to send
    with conn_sock:
        for _ in range(100_000):  # bounded; a stalled client ends it by closing
            data = conn_sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    conn.send_headers(ev.stream_id, [(b":status", b"200")])
                    left[ev.stream_id] = body_bytes
            # A frame per stream in turn, as servers interleave streams, while windows allow.
            sent = True
            while sent:
                sent = False
                for sid in list(left):
                    room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                    if room <= 0:
                        continue
                    n = min(room, left[sid])
                    left[sid] -= n
                    conn.send_data(sid, b"x" * n, end_stream=not left[sid])
                    sent = True
                    if not left[sid]:
                        del left[sid]
            conn_sock.sendall(conn.data_to_send())


def _server(body_bytes: int) -> AbstractContextManager[str]:
    return serve_in_thread(_serve, body_bytes)


HUGE = 1 << 40  # an acknowledgement rule that never fires


def small_windows(monkeypatch: pytest.MonkeyPatch, ack_every: int, ack_all_at: int) -> None:
    """Windows small enough to fill, and one acknowledgement rule at a time: each test fails
    when the rule it leaves on is broken."""
    monkeypatch.setattr(h2_client, "STREAM_WINDOW", STREAM_WINDOW)
    monkeypatch.setattr(h2_client, "CONNECTION_WINDOW", CONNECTION_WINDOW)
    monkeypatch.setattr(h2_client, "ACK_EVERY", ack_every)
    monkeypatch.setattr(h2_client, "ACK_ALL_AT", ack_all_at)


async def _get_all(url: str, paths: list[str], body: int, at_once: bool = True) -> None:
    """Every path on one connection, at once or one after another; each must arrive whole."""
    tr = make("h2", url)
    await tr.open()
    try:
        if at_once:
            results = await asyncio.gather(*(send(tr, get(p), timeout_s=10) for p in paths))
        else:
            results = []
            for p in paths:  # a stalled one fails at once, not after every later timeout
                results.append(await send(tr, get(p), timeout_s=10))
                assert results[-1][0].error is None, (p, results[-1][0].error)
    finally:
        await tr.close()
    for ex, sink in results:
        assert ex.error is None, ex.error
        assert len(sink.body) == body


def test_a_stream_longer_than_its_window_arrives_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Acknowledged a slice at a time (ACK_EVERY) while it lasts: five windows' worth."""
    small_windows(monkeypatch, ack_every=STREAM_WINDOW // 4, ack_all_at=HUGE)
    body = 5 * STREAM_WINDOW
    with _server(body) as url:
        run(lambda: _get_all(url, ["/long"], body))


def test_streams_that_end_before_an_acknowledgement_give_the_connection_its_window_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each stream is acknowledged at its end only; one after another they take three
    connection windows."""
    small_windows(monkeypatch, ack_every=HUGE, ack_all_at=HUGE)
    body = STREAM_WINDOW // 8
    paths = [f"/s{i}" for i in range(3 * CONNECTION_WINDOW // body)]
    with _server(body) as url:
        run(lambda: _get_all(url, paths, body, at_once=False))


def test_many_open_streams_are_acknowledged_together_before_the_connection_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight streams at once, each under its own window and the acknowledgement slice, need
    1.5 connection windows; sent a frame each in turn, none ends before the connection's
    window is used up: only acknowledging them all together (ACK_ALL_AT) lets them end."""
    small_windows(monkeypatch, ack_every=HUGE, ack_all_at=CONNECTION_WINDOW // 4)
    body = 3 * STREAM_WINDOW // 4
    with _server(body) as url:
        run(lambda: _get_all(url, [f"/p{i}" for i in range(8)], body))
