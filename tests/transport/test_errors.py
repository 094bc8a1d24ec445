"""Every failure lands in the right TransportError class, over HTTP/1.1 and HTTP/2."""

from __future__ import annotations

import time

import pytest

from tests.servers import ProgrammedServer
from tests.transport.util import KINDS, get, make, run, send
from zqbench.transport.base import (
    BodyTooLarge,
    ConnectError,
    ConnectionReset,
    ProtocolViolation,
    RequestTimeout,
)

pytestmark = pytest.mark.parametrize("kind", KINDS)

# What a busy 2-core machine may add to a deadline (a CPU hog on one core, other suites on
# the other): timing bounds here tell a deadline kept from one missed, not a fast machine.
SLACK_S = 5.0


def test_open_refused_raises_connect_error_naming_address(kind: str, refused_url: str) -> None:
    tr = make(kind, refused_url)

    async def go() -> None:
        try:
            await tr.open()
        finally:
            await tr.close()

    with pytest.raises(ConnectError) as info:
        run(go)
    msg = str(info.value)
    assert refused_url.removeprefix("http://") in msg
    assert "\n" not in msg


def test_open_gives_up_within_connect_timeout(kind: str, blackhole_url: str) -> None:
    tr = make(kind, blackhole_url, connect_timeout_s=0.3)

    async def go() -> None:
        try:
            await tr.open()
        finally:
            await tr.close()

    t0 = time.monotonic()
    with pytest.raises(ConnectError):
        run(go)
    elapsed = time.monotonic() - t0
    # Given up at the 0.3 s timeout, not after the kernel's SYN retries (about two minutes);
    # the slack is for a busy machine.
    assert 0.25 <= elapsed < 0.3 + SLACK_S, f"{elapsed:.3f} s"


def test_hang_becomes_timeout_at_the_deadline(kind: str, programmed_server: ProgrammedServer):
    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            hung = await send(tr, get("/hang"), timeout_s=0.3)
            after = await send(tr, get("/health"))  # the transport is still usable
        finally:
            await tr.close()
        return hung, after

    (ex, sink), (ok, _) = run(go)
    assert isinstance(ex.error, RequestTimeout)
    assert 0.29 <= (ex.t_end - ex.t_send) / 1e9 < 0.45
    assert sink.t_end == 0 and sink.status == 0
    assert ok.error is None


def test_stall_mid_stream_becomes_timeout_after_headers(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            return await send(tr, get("/sse?n=5&every=10&stall_at=2&stall_ms=2000"), timeout_s=0.4)
        finally:
            await tr.close()

    ex, sink = run(go)
    assert isinstance(ex.error, RequestTimeout)
    assert sink.status == 200 and sink.body.count(b"data:") == 2 and sink.t_end == 0
    assert 0.39 <= (ex.t_end - ex.t_send) / 1e9 < 0.55


@pytest.mark.parametrize("path", ["/reset?bytes=3000&tcp=1", "/close?bytes=3000"])
def test_peer_cut_mid_body_is_reset(kind: str, path: str, programmed_server: ProgrammedServer):
    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            return await send(tr, get(path))
        finally:
            await tr.close()

    ex, sink = run(go)
    assert isinstance(ex.error, ConnectionReset), ex.error
    assert sink.status == 200 and sink.t_end == 0
    assert ex.bytes_in == 3000 == len(sink.body)
    assert ex.t_end >= sink.chunks[-1][0]


def test_garbage_is_protocol_violation(kind: str, programmed_server: ProgrammedServer) -> None:
    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            return await send(tr, get("/garbage"))
        finally:
            await tr.close()

    ex, sink = run(go)
    assert isinstance(ex.error, ProtocolViolation), ex.error
    assert sink.status == 0


def test_body_over_cap_is_too_large_and_connection_dropped(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    cap = 1_000_000

    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1, max_body_bytes=cap)
        await tr.open()
        try:
            big = await send(tr, get("/big?bytes=5000000", "cap-big"))
            small = await send(tr, get("/big?bytes=1000000", "cap-small"))  # exactly the cap
        finally:
            await tr.close()
        return big, small

    (ex, sink), (ok, ok_sink) = run(go)
    assert isinstance(ex.error, BodyTooLarge)
    assert cap < ex.bytes_in < 5_000_000
    assert len(sink.body) <= cap  # the chunk that crossed the cap is not delivered
    assert ok.error is None and ok.bytes_in == cap == len(ok_sink.body)
    if kind == "h1":
        # HTTP/1.1 cannot abandon a body and reuse the connection: a new one serves the next.
        truth = programmed_server.truth("cap-big"), programmed_server.truth("cap-small")
        assert truth[0]["conn"] != truth[1]["conn"]


def test_20mb_body_arrives_whole(kind: str, programmed_server: ProgrammedServer) -> None:
    async def go():
        tr = make(kind, programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            return await send(tr, get("/big?bytes=20000000"), timeout_s=20)
        finally:
            await tr.close()

    ex, sink = run(go)
    assert ex.error is None
    assert ex.bytes_in == 20_000_000 == len(sink.body)
    assert sink.t_end >= sink.chunks[-1][0] >= sink.t_headers >= ex.t_send
