"""A huge prompt is refused by its size before it is parsed or tokenized, and it does not
stall anyone else's request (issue #12 item 7)."""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from reference_server.request import body_limit
from tests.reference_server.conftest import MODEL, Server, start_server

HUGE = 30_000_000  # bytes of prompt: far beyond any context, well within --body-limit


def test_body_limit_follows_the_context() -> None:
    """--body-limit, or 1 MiB plus 64 bytes per context token when that is smaller."""
    assert body_limit(32 << 20, 2048) == (1 << 20) + 64 * 2048
    assert body_limit(65536, 2048) == 65536
    assert body_limit(32 << 20, 1 << 20) == 32 << 20


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    server = start_server("--engine", "sim", "--max-context", "2048", "--body-limit", "33554432")
    yield server
    server.stop()


def _huge_body() -> bytes:
    """A generation request whose prompt is HUGE bytes long (valid in both dialects)."""
    body = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "x" * HUGE}]}
    return json.dumps(body).encode()


def _connect(server: Server) -> socket.socket:
    port = int(server.url.rsplit(":", 1)[1])
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _response(sock: socket.socket) -> tuple[int, dict[str, object]]:
    """Read one HTTP/1.1 response with a content-length body: (status, JSON body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        assert part, f"connection closed before a response head: {data!r}"
        data += part
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    while len(rest) < int(headers["content-length"]):
        part = sock.recv(65536)
        assert part, "connection closed inside the response body"
        rest += part
    return int(lines[0].split()[1]), json.loads(rest)


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    """Upload as much as the server takes; it may answer and stop reading first."""
    with contextlib.suppress(OSError):
        sock.sendall(data)


def _hang_up(sock: socket.socket) -> None:
    """End both directions, so that a sender blocked on the socket returns."""
    with contextlib.suppress(OSError):  # the server may have closed it already
        sock.shutdown(socket.SHUT_RDWR)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/chat/completions"])
def test_declared_huge_body_is_refused_before_it_is_read(server: Server, path: str) -> None:
    """The declared content-length alone earns the 413, in the route's error shape:
    the server does not wait for (or parse) the 30 MB."""
    with _connect(server) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(_huge_body())}\r\n\r\n".encode()
        )
        status, body = _response(sock)
    assert status == 413
    if path == "/v1/messages":
        assert body["type"] == "error"
        assert body["error"]["type"] == "request_too_large"  # type: ignore[index]
    else:
        assert body["error"]["code"] == "request_too_large"  # type: ignore[index]


@pytest.mark.slow
def test_chunked_huge_body_is_refused_by_size(server: Server) -> None:
    """Without a content-length the read stops at the limit: 413, not a parse and a 400."""
    data = _huge_body()
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        mib = 1 << 20
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(data[i : i + mib]), data[i : i + mib])
            for i in range(0, len(data), mib)
        )
        sender = threading.Thread(target=_send_quietly, args=(sock, chunks + b"0\r\n\r\n"))
        sender.start()
        status, body = _response(sock)
        _hang_up(sock)
        sender.join(30)
    assert status == 413 and body["error"]["type"] == "request_too_large"  # type: ignore[index]


def _latencies(client: httpx.Client, n: int, tick: threading.Event | None = None) -> list[float]:
    """n small requests one after another, each one's latency; `tick` is set after each."""
    small = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        assert client.post("/v1/messages", json=small).status_code == 200
        out.append(time.perf_counter() - t0)
        if tick is not None:
            tick.set()
    return out


@pytest.mark.slow
def test_huge_prompts_do_not_stall_small_requests(server: Server) -> None:
    """Small requests' latency while 30 MB prompts keep arriving (one per small request)
    stays within a generous multiple of their latency measured just before, on the same
    server and client."""
    data = _huge_body()
    request = (
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(data), data)
    )
    stop, tick = threading.Event(), threading.Event()
    statuses: list[int] = []

    def upload_huge_prompt() -> None:
        with _connect(server) as sock:
            sender = threading.Thread(target=_send_quietly, args=(sock, request))
            sender.start()
            statuses.append(_response(sock)[0])
            _hang_up(sock)
            sender.join(30)

    def upload_huge_prompts() -> None:
        while not stop.is_set():
            upload_huge_prompt()
            tick.wait(30)  # paced by the small requests: one upload per small request
            tick.clear()

    with httpx.Client(base_url=server.url, timeout=30) as client:
        upload_huge_prompt()  # first-time costs (buffers, threads) stay out of the comparison
        _latencies(client, 10)  # warm the connection and the server
        baseline = _latencies(client, 40)
        uploader = threading.Thread(target=upload_huge_prompts)
        uploader.start()
        try:
            loaded = _latencies(client, 40, tick)
        finally:
            stop.set()
            tick.set()
            uploader.join(60)
    # The second worst: one outlier is allowed on a shared machine; a 30 MB prompt that is
    # parsed and tokenized stalls a request per upload, by about 250 ms each.
    second_worst = sorted(loaded)[-2]
    bound = max(4 * max(baseline), 20 * statistics.median(baseline))
    assert second_worst <= bound, (sorted(loaded)[-3:], bound, max(baseline))
    assert statuses and set(statuses) == {413}
