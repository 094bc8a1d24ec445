"""An HTTP/2 `:status` that is no status code fails its stream as `protocol` (#25 item 9).

h2 leaves a response's `:status` value to the client; `abc` raised ValueError inside the
connection's data callback (asyncio tracebacks, `probe --http2` exit 5)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager

import h2.config
import h2.connection
import h2.events
import pytest
from hyperframe.frame import PushPromiseFrame

from tests.transport.util import get, make, run, send, serve_in_thread
from zqbench.errors import TargetError
from zqbench.target.control import check_reachable
from zqbench.transport.base import ProtocolViolation


def _serve(sock: socket.socket, status: bytes, push: bool = False) -> None:
    """One h2c connection: every request answered with `:status: <status>`, unchecked;
    with `push`, a PUSH_PROMISE first (which the client never allowed)."""
    conn_sock, _ = sock.accept()
    config = h2.config.H2Configuration(
        client_side=False, validate_outbound_headers=False, normalize_outbound_headers=False
    )
    conn = h2.connection.H2Connection(config)
    conn.initiate_connection()
    conn_sock.sendall(conn.data_to_send())
    with conn_sock:
        for _ in range(100):  # bounded: the test sends two requests
            data = conn_sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    if push:
                        conn_sock.sendall(conn.data_to_send() + _push_promise(conn, ev.stream_id))
                    conn.send_headers(ev.stream_id, [(b":status", status)], end_stream=True)
            conn_sock.sendall(conn.data_to_send())


def _push_promise(conn: h2.connection.H2Connection, stream_id: int) -> bytes:
    """A PUSH_PROMISE frame on `stream_id`, written by hand: h2 refuses to push to a client
    that disabled push, as zqbench's clients do."""
    frame = PushPromiseFrame(stream_id, promised_stream_id=2, flags=["END_HEADERS"])
    frame.data = conn.encoder.encode(
        [(":method", "GET"), (":path", "/x"), (":scheme", "http"), (":authority", "a")]
    )
    return bytes(frame.serialize())


def _server(status: bytes, push: bool = False) -> AbstractContextManager[str]:
    return serve_in_thread(_serve, status, push)


@pytest.fixture
def odd_status_url() -> Iterator[str]:
    with _server(b"abc") as url:
        yield url


def test_a_status_that_is_no_code_is_a_protocol_error(odd_status_url: str) -> None:
    async def go():
        tr = make("h2", odd_status_url)
        await tr.open()
        try:
            return [await send(tr, get("/")) for _ in range(2)]
        finally:
            await tr.close()

    for ex, sink in run(go):
        assert isinstance(ex.error, ProtocolViolation)
        assert str(ex.error) == "invalid HTTP/2 :status 'abc'"
        assert sink.status == 0  # the sink never heard a status


@pytest.mark.parametrize(
    ("status", "push", "reason"),
    [
        (b"abc", False, "malformed answer: invalid literal for int() with base 10: 'abc'"),
        (b"200", True, "Received pushed stream"),
    ],
)
def test_the_control_client_calls_a_malformed_answer_the_targets_fault(
    status: bytes, push: bool, reason: str
) -> None:
    # httpcore let int()'s ValueError through: `run --http2` and `probe --http2` exit 5 (#44).
    with _server(status, push) as url, pytest.raises(TargetError) as e:
        check_reachable(url, http2=True)
    assert e.value.message == f"cannot reach {url.removeprefix('http://')}: {reason}"
