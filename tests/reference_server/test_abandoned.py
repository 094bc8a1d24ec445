"""Clients that give up leak nothing: every handler returns, the in-flight gauge goes back
to its baseline, and SIGTERM does not wait out the drain timeout (issue #12 item 2)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from reference_server.backend import SamplingParams
from reference_server.model import tokenizer
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence
from tests.reference_server.conftest import MODEL, Server, start_server

DRAIN_TIMEOUT_S = 60


def _open(server: Server, body: dict[str, object]) -> socket.socket:
    """Send one POST /v1/messages on a raw socket and return it, unread."""
    port = int(server.url.rsplit(":", 1)[1])
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def _read_until(sock: socket.socket, marker: bytes) -> None:
    seen = b""
    while marker not in seen:
        part = sock.recv(65536)
        assert part, "the server closed the stream early"
        seen += part


def _gauge(server: Server, name: str) -> float:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    m = re.search(rf"^refserver_{name} (\S+)$", text, re.M)
    assert m is not None, name
    return float(m.group(1))


def _poll(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _body(max_tokens: int, stream: bool) -> dict[str, object]:
    return {"model": MODEL, "max_tokens": max_tokens, "stream": stream,
            "messages": [{"role": "user", "content": "abandon me"}]}  # fmt: skip


def _seq(loop: asyncio.AbstractEventLoop) -> Sequence:
    prompt = [tokenizer.BOS] * 4
    received = (time.time(), time.perf_counter())
    return Sequence("req_x", prompt, 4, (), SamplingParams(), "high-throughput", *received, loop)


def test_abandoned_queued_requests_leave_the_queue_at_the_next_boundary() -> None:
    """fifo: a queued request whose client left is handed back as abandoned at once,
    without waiting for a free slot; the others keep their order."""
    loop = asyncio.new_event_loop()
    try:
        sched = Scheduler("fifo", max_slots=1, kv_budget_tokens=1000)
        seqs = [_seq(loop) for _ in range(4)]
        for s in seqs:
            assert sched.submit(s) is None
        assert sched.take_new() == ([seqs[0]], [], [])
        sched.abort(seqs[2])
        assert sched.take_new() == ([], [], [seqs[2]])
        assert sched.num_waiting == 2
        sched.release(seqs[0])
        assert sched.take_new().new == [seqs[1]]
    finally:
        loop.close()


@pytest.mark.slow
def test_abandoned_requests_release_their_handlers() -> None:
    """Streams dropped mid-way, a non-streaming request dropped while running, and queued
    streaming and non-streaming requests dropped before their first step: once all are
    gone the in-flight gauge is back to its baseline (1: the /metrics call itself), and a
    SIGTERM exits well within the drain timeout."""
    server = start_server(
        "--engine", "sim", "--scheduler", "fifo", "--max-batch-size", "4",
        "--max-context", "8192", "--max-tokens-limit", "8000",
        "--drain-timeout", str(DRAIN_TIMEOUT_S),
    )  # fmt: skip
    socks: list[socket.socket] = []
    try:
        for _ in range(3):  # streaming, abandoned mid-way
            socks.append(_open(server, _body(8000, stream=True)))
            _read_until(socks[-1], b"content_block_delta")
        socks.append(_open(server, _body(8000, stream=False)))  # running, the 4th slot
        _poll(lambda: _gauge(server, "num_requests_running") == 4, "4 running")
        for stream in (True, False, True, False, True, False):  # queued behind them
            socks.append(_open(server, _body(5, stream=stream)))
        _poll(lambda: _gauge(server, "num_requests_waiting") == 6, "6 waiting")
        for sock in socks:
            sock.close()
        _poll(lambda: _gauge(server, "num_requests_in_flight") == 1, "in-flight back to 1")
        assert _gauge(server, "num_requests_running") == 0
        assert _gauge(server, "num_requests_waiting") == 0
        start = time.monotonic()
        server.proc.terminate()
        assert server.proc.wait(DRAIN_TIMEOUT_S + 30) == 0
        assert time.monotonic() - start < DRAIN_TIMEOUT_S / 2
    finally:
        for sock in socks:
            sock.close()
        server.stop()
