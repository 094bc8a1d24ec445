"""Pytest fixtures for the programmed loopback server (see `tests.servers`).

The servers are module-scoped (start-up costs ~0.3 s of Python import); call `srv.reset()`
in a test that counts connections or requests.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.servers import ProgrammedServer, free_port, make_self_signed_cert


@pytest.fixture(scope="module")
def programmed_server() -> Iterator[ProgrammedServer]:
    """HTTP/1.1 and h2c (prior knowledge) on one loopback port."""
    with ProgrammedServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProgrammedServer]:
    """HTTPS with a self-signed certificate; ALPN offers h2 and http/1.1."""
    cert = make_self_signed_cert(tmp_path_factory.mktemp("tls"))
    with ProgrammedServer(tls=cert) as srv:
        yield srv


@pytest.fixture
def refused_url() -> str:
    """A loopback URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def blackhole_url() -> Iterator[str]:
    """A loopback URL whose connects hang: the listen backlog is full and nobody accepts,
    so the kernel drops further SYNs (a real connect timeout, no network needed)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=2)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        filler.close()
        listener.close()
