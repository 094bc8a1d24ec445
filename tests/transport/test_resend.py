"""The one resend, in both HTTP/1.1 transports: a request whose reused kept-alive connection
the server closed under it, before any byte of an answer, is sent once more on a new
connection, and the pool stops reusing connections for the rest of the run. Never a fresh
connection's failure, never one after any byte."""

from __future__ import annotations

import pytest

from tests.servers import ProgrammedServer
from tests.transport.util import get, make, run, send
from zqbench.transport.aiohttp_h1 import AiohttpTransport
from zqbench.transport.base import ConnectionReset, Exchange
from zqbench.transport.raw_h1 import RawH1Transport

H1_KINDS = ["h1", "h1-aiohttp"]
CLOSING = "/anthropic?n=2&every=0&first=0&close_after=1"


def _pool(tr: object) -> RawH1Transport | AiohttpTransport:
    assert isinstance(tr, (RawH1Transport, AiohttpTransport))
    return tr


@pytest.mark.parametrize("kind", H1_KINDS)
def test_a_server_closing_after_each_stream_costs_no_request(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    """llama.cpp's server closes after every streamed response although its head promised
    keep-alive. 200 back to back: no transport:reset, the server saw each exactly once, and
    after the first resend no connection was reused (so no second resend was needed)."""
    programmed_server.reset()

    async def go() -> tuple[list[Exchange], RawH1Transport | AiohttpTransport]:
        tr = _pool(make(kind, programmed_server.url, max_connections=1, warm_connections=1))
        await tr.open()
        try:
            done = []
            for i in range(200):
                ex, _ = await send(tr, get(CLOSING, f"{kind}-closing-{i}"))
                done.append(ex)
            return done, tr
        finally:
            await tr.close()

    done, tr = run(go)
    assert [ex.error for ex in done if ex.error is not None] == []
    truth = programmed_server.all_truth()
    assert truth["requests"] == 200  # none twice, none lost
    assert {f"{kind}-closing-{i}" for i in range(200)} <= set(truth["truth"])
    resent = [i for i, ex in enumerate(done) if ex.resent]
    assert len(resent) == tr.stale_retries
    # At most the first: from then on each request opens its own connection. (None when
    # every FIN was noticed before the next request went out, which loopback rarely allows.)
    assert tr.stale_retries <= 1
    if resent:
        assert tr.reuse_stopped
        conns = [truth["truth"][f"{kind}-closing-{i}"]["conn"] for i in range(200)]
        assert len(set(conns[resent[0] :])) == 200 - resent[0]  # none reused after it


@pytest.mark.parametrize("kind", H1_KINDS)
def test_a_fresh_connections_failure_is_not_resent(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    """No warm connection: the request opens its own, the server closes it unanswered. That is
    the request's own failure (reset), sent once, and the pool keeps reusing connections."""
    programmed_server.reset()

    async def go() -> tuple[Exchange, RawH1Transport | AiohttpTransport]:
        tr = _pool(make(kind, programmed_server.url, max_connections=1, warm_connections=0))
        await tr.open()
        try:
            ex, _ = await send(tr, get("/goaway", f"{kind}-fresh"))
            return ex, tr
        finally:
            await tr.close()

    ex, tr = run(go)
    assert isinstance(ex.error, ConnectionReset)
    assert not ex.resent and tr.stale_retries == 0 and not tr.reuse_stopped
    assert programmed_server.all_truth()["requests"] == 1


@pytest.mark.parametrize("kind", H1_KINDS)
def test_a_reused_connection_is_resent_once_only(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    """Closed unanswered on a reused connection, then again on the new one: one resend, and
    the second failure is the request's own."""
    programmed_server.reset()

    async def go() -> tuple[Exchange, RawH1Transport | AiohttpTransport]:
        tr = _pool(make(kind, programmed_server.url, max_connections=1, warm_connections=1))
        await tr.open()
        try:
            ok, _ = await send(tr, get("/delay?ms=0&size=10", f"{kind}-first"))
            assert ok.error is None
            ex, _ = await send(tr, get("/goaway", f"{kind}-twice"))
            return ex, tr
        finally:
            await tr.close()

    ex, tr = run(go)
    assert isinstance(ex.error, ConnectionReset)
    assert ex.resent and tr.stale_retries == 1
    assert programmed_server.all_truth()["requests"] == 3  # the first, then this one twice


@pytest.mark.parametrize("kind", H1_KINDS)
def test_a_failure_after_a_byte_is_not_resent(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    programmed_server.reset()

    async def go() -> tuple[Exchange, RawH1Transport | AiohttpTransport]:
        tr = _pool(make(kind, programmed_server.url, max_connections=1, warm_connections=1))
        await tr.open()
        try:
            ok, _ = await send(tr, get("/delay?ms=0&size=10", f"{kind}-first"))
            assert ok.error is None
            ex, _ = await send(tr, get("/close?bytes=10", f"{kind}-cut"))
            return ex, tr
        finally:
            await tr.close()

    ex, tr = run(go)
    assert isinstance(ex.error, ConnectionReset)
    assert not ex.resent and tr.stale_retries == 0
    assert programmed_server.all_truth()["requests"] == 2
