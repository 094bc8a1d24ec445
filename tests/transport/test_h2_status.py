"""An HTTP/2 `:status` that is no status code fails its stream as `protocol` (#25 item 9).

h2 leaves a response's `:status` value to the client; `abc` raised ValueError inside the
connection's data callback (asyncio tracebacks, `probe --http2` exit 5)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import h2.config
import h2.connection
import h2.events
import pytest

from tests.transport.util import get, make, run, send
from zqbench.transport.base import ProtocolViolation


def _serve(sock: socket.socket, status: bytes) -> None:
    """One h2c connection: every request answered with `:status: <status>`, unchecked."""
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
                    conn.send_headers(ev.stream_id, [(b":status", status)], end_stream=True)
            conn_sock.sendall(conn.data_to_send())


@pytest.fixture
def odd_status_url() -> Iterator[str]:
    sock = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=_serve, args=(sock, b"abc"), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    thread.join(5)


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
