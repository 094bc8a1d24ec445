"""RawH1Transport: the same behaviours as the aiohttp transport, plus its parser on odd splits."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest

from tests.servers import ProgrammedServer, RecordingSink
from tests.transport.util import MAX_MEDIAN_GAP_NS, get, run, send
from zqbench.transport.base import (
    BodyTooLarge,
    ConnectError,
    ConnectionReset,
    Exchange,
    HttpRequest,
    PoolLimits,
    ProtocolViolation,
    RequestTimeout,
)
from zqbench.transport.raw_h1 import MAX_KNOWN_HEADS, RawH1Transport, _Conn


def make(url: str, **limits: object) -> RawH1Transport:
    return RawH1Transport(url, PoolLimits(**limits), insecure=True)  # type: ignore[arg-type]


def one(url: str, path: str, timeout_s: float = 5.0, **limits: object):
    async def go():
        tr = make(url, warm_connections=1, **limits)
        await tr.open()
        try:
            return await send(tr, get(path), timeout_s)
        finally:
            await tr.close()

    return run(go)


# -- errors against the programmed server


def test_open_refused_raises_connect_error_naming_address(refused_url: str) -> None:
    async def go() -> None:
        tr = make(refused_url)
        try:
            await tr.open()
        finally:
            await tr.close()

    with pytest.raises(ConnectError) as info:
        run(go)
    assert refused_url.removeprefix("http://") in str(info.value)
    assert "\n" not in str(info.value)


def test_open_gives_up_within_connect_timeout(blackhole_url: str) -> None:
    async def go() -> None:
        tr = make(blackhole_url, connect_timeout_s=0.3)
        try:
            await tr.open()
        finally:
            await tr.close()

    t0 = time.monotonic()
    with pytest.raises(ConnectError):
        run(go)
    elapsed = time.monotonic() - t0
    # Given up at the 0.3 s timeout, not after the kernel's SYN retries (about two minutes);
    # 5 s of slack is for a busy machine.
    assert 0.25 <= elapsed < 0.3 + 5.0, f"{elapsed:.3f} s"


def test_hang_becomes_timeout_and_transport_stays_usable(programmed_server: ProgrammedServer):
    async def go():
        tr = make(programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            hung = await send(tr, get("/hang"), timeout_s=0.3)
            after = await send(tr, get("/health"))
        finally:
            await tr.close()
        return hung, after

    (ex, sink), (ok, ok_sink) = run(go)
    assert isinstance(ex.error, RequestTimeout)
    assert 0.29 <= (ex.t_end - ex.t_send) / 1e9 < 0.45
    assert sink.t_end == 0 and sink.status == 0
    assert ok.error is None and ok_sink.body == b"ok\n"


def test_stall_mid_stream_becomes_timeout_after_headers(programmed_server: ProgrammedServer):
    ex, sink = one(
        programmed_server.url, "/sse?n=5&every=10&stall_at=2&stall_ms=2000", timeout_s=0.4
    )
    assert isinstance(ex.error, RequestTimeout)
    assert sink.status == 200 and sink.body.count(b"data:") == 2 and sink.t_end == 0
    assert 0.39 <= (ex.t_end - ex.t_send) / 1e9 < 0.55


@pytest.mark.parametrize("path", ["/reset?bytes=3000&tcp=1", "/close?bytes=3000"])
def test_peer_cut_mid_body_is_reset(path: str, programmed_server: ProgrammedServer) -> None:
    ex, sink = one(programmed_server.url, path)
    assert isinstance(ex.error, ConnectionReset), ex.error
    assert sink.status == 200 and sink.t_end == 0
    assert ex.bytes_in == 3000 == len(sink.body)
    assert ex.t_end >= sink.chunks[-1][0]


def test_close_without_answer_is_reset(programmed_server: ProgrammedServer) -> None:
    ex, sink = one(programmed_server.url, "/goaway")  # HTTP/1.1: close without answering
    assert isinstance(ex.error, ConnectionReset) and "before any response" in str(ex.error)
    assert sink.status == 0


def test_garbage_is_protocol_violation(programmed_server: ProgrammedServer) -> None:
    ex, sink = one(programmed_server.url, "/garbage")
    assert isinstance(ex.error, ProtocolViolation), ex.error
    assert sink.status == 0


def test_body_over_cap_is_too_large_and_connection_dropped(programmed_server: ProgrammedServer):
    cap = 1_000_000

    async def go():
        tr = make(programmed_server.url, warm_connections=1, max_body_bytes=cap)
        await tr.open()
        try:
            big = await send(tr, get("/big?bytes=5000000", "raw-cap-big"))
            small = await send(tr, get("/big?bytes=1000000", "raw-cap-small"))  # exactly the cap
        finally:
            await tr.close()
        return big, small

    (ex, sink), (ok, ok_sink) = run(go)
    assert isinstance(ex.error, BodyTooLarge)
    assert cap < ex.bytes_in < 5_000_000
    assert len(sink.body) <= cap  # the piece that crossed the cap is not delivered
    assert ok.error is None and ok.bytes_in == cap == len(ok_sink.body)
    truth = programmed_server.truth("raw-cap-big"), programmed_server.truth("raw-cap-small")
    assert truth[0]["conn"] != truth[1]["conn"]


def test_20mb_body_arrives_whole(programmed_server: ProgrammedServer) -> None:
    ex, sink = one(programmed_server.url, "/big?bytes=20000000", timeout_s=20)
    assert ex.error is None
    assert ex.bytes_in == 20_000_000 == len(sink.body)
    assert sink.t_end >= sink.chunks[-1][0] >= sink.t_headers >= ex.t_send


def test_post_body_is_sent_and_echoed(programmed_server: ProgrammedServer) -> None:
    async def go():
        tr = make(programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            req = HttpRequest("POST", "/echo", (("content-type", "application/json"),), b"{}" * 500)
            return await send(tr, req)
        finally:
            await tr.close()

    ex, sink = run(go)
    assert ex.error is None and sink.status == 200 and sink.body == b"{}" * 500


# -- the pool


def test_a_server_closing_after_each_stream_costs_no_request(
    programmed_server: ProgrammedServer,
) -> None:
    """llama.cpp's server closes the connection after every streamed response although its
    head promised keep-alive; a request written before the FIN lands dies before any byte
    of an answer. 200 back to back: each is sent once more on a new connection when that
    happens, none fails, and the server saw each exactly once (it never read the first)."""
    programmed_server.reset()
    path = "/anthropic?n=2&every=0&first=0&close_after=1"

    async def go() -> tuple[list[Exchange], RawH1Transport]:
        tr = make(programmed_server.url, max_connections=1, warm_connections=1)
        await tr.open()
        try:
            done = []
            for i in range(200):
                ex, _ = await send(tr, get(path, f"raw-closing-{i}"))
                done.append(ex)
            return done, tr
        finally:
            await tr.close()

    done, tr = run(go)
    assert [ex.error for ex in done if ex.error is not None] == []
    truth = programmed_server.all_truth()
    assert truth["requests"] == 200  # none twice, none lost
    assert {f"raw-closing-{i}" for i in range(200)} <= set(truth["truth"])
    # Every connection served one stream: each later request found its connection either
    # noticed closed (a new one) or closing under it (sent once more).
    assert truth["conns"] >= 200
    assert tr.opened == truth["conns"]  # each a connection this pool opened and counted


def test_keep_alive_reuses_at_most_pool_size(programmed_server: ProgrammedServer) -> None:
    programmed_server.reset()

    async def go() -> None:
        tr = make(programmed_server.url, max_connections=4, warm_connections=4)
        await tr.open()
        try:

            async def worker(w: int) -> None:
                for i in range(25):
                    ex, _ = await send(tr, get("/health", f"raw-ka-{w}-{i}"))
                    assert ex.error is None

            await asyncio.gather(*(worker(w) for w in range(8)))  # 8 users, 4 connections
        finally:
            await tr.close()

    run(go)
    truth = programmed_server.all_truth()
    assert truth["requests"] == 200 and truth["conns"] == 4
    assert len({r["conn"] for r in truth["truth"].values()}) == 4


def test_open_prewarms_and_first_requests_open_nothing(programmed_server: ProgrammedServer):
    programmed_server.reset()
    seen: dict[str, int] = {}

    async def go() -> None:
        tr = make(programmed_server.url, max_connections=16, warm_connections=6)
        await tr.open()
        try:
            seen["after_open"] = programmed_server.all_truth()["conns"]
            results = await asyncio.gather(
                *(send(tr, get("/delay?ms=30", f"raw-warm-{i}")) for i in range(6))
            )
            assert all(ex.error is None for ex, _ in results)
        finally:
            await tr.close()

    run(go)
    assert seen["after_open"] == 6
    assert programmed_server.all_truth()["conns"] == 6


def test_max_connections_bounds_concurrency(programmed_server: ProgrammedServer) -> None:
    programmed_server.reset()

    async def go() -> float:
        tr = make(programmed_server.url, max_connections=2, warm_connections=1)
        await tr.open()
        try:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(send(tr, get("/delay?ms=40")) for _ in range(6)))
            assert all(ex.error is None for ex, _ in results)
            return time.perf_counter() - t0
        finally:
            await tr.close()

    elapsed = run(go)
    assert programmed_server.all_truth()["conns"] == 2
    assert elapsed >= 3 * 0.040  # six 40 ms requests, two at a time


def test_https_with_self_signed_cert(tls_server: ProgrammedServer) -> None:
    async def go():
        tr = make(tls_server.url, warm_connections=2)  # insecure=True
        await tr.open()
        try:
            return await send(tr, get("/sse?n=3&every=1", "raw-tls"))
        finally:
            await tr.close()

    ex, sink = run(go)
    assert ex.error is None and sink.body.count(b"data:") == 4
    assert tls_server.truth("raw-tls")["proto"] == "1.1"


def test_https_verifies_certificates_by_default(tls_server: ProgrammedServer) -> None:
    async def go() -> None:
        tr = RawH1Transport(tls_server.url, PoolLimits(warm_connections=1))
        try:
            await tr.open()
        finally:
            await tr.close()

    with pytest.raises(ConnectError, match=r"127\.0\.0\.1"):
        run(go)


# -- timing against the server's ground truth


def test_stream_stamps_never_before_the_server_write(programmed_server: ProgrammedServer):
    """20 concurrent chunked SSE streams x 20 events: every stamp is at or after the server's
    write of those bytes, and the median gap is small (as in test_timing.py)."""
    streams, tokens = 20, 20
    path = f"/sse?n={tokens}&every=10&first=5&head=2"

    async def go() -> list[tuple[str, Exchange, RecordingSink]]:
        tr = make(programmed_server.url, warm_connections=streams)
        await tr.open()
        try:

            async def one_stream(i: int) -> tuple[str, Exchange, RecordingSink]:
                rid = f"raw-timing-{i}"
                sink = RecordingSink()
                await asyncio.sleep(i * 0.002)
                return rid, await tr.send(get(path, rid), sink, 10, Exchange()), sink

            return await asyncio.gather(*(one_stream(i) for i in range(streams)))
        finally:
            await tr.close()

    head_gaps, data_gaps = [], []
    for rid, ex, sink in run(go):
        assert ex.error is None
        truth = programmed_server.truth(rid)
        assert truth is not None and truth["outcome"] == "ok"
        assert ex.t_send <= truth["t_recv"]
        head_gaps.append(sink.t_headers - truth["t_head"])
        body, ends, pos = sink.body, [], 0
        while (pos := body.find(b"\n\n", pos) + 2) > 1:
            ends.append(pos)
        assert len(ends) == len(truth["t_chunks"]) == tokens + 1
        for end, t_server in zip(ends, truth["t_chunks"], strict=True):
            data_gaps.append(sink.time_of_byte(end - 1) - t_server)
        assert sink.t_end >= sink.chunks[-1][0]
    assert min(head_gaps) >= 0 and min(data_gaps) >= 0
    medians_ms = [statistics.median(gaps) / 1e6 for gaps in (head_gaps, data_gaps)]
    assert max(medians_ms) < MAX_MEDIAN_GAP_NS / 1e6, f"median gap head, data: {medians_ms} ms"


def test_ttfb_is_at_least_the_programmed_delay(programmed_server: ProgrammedServer) -> None:
    async def go():
        tr = make(programmed_server.url, warm_connections=2)
        await tr.open()
        try:
            return [await send(tr, get("/delay?ms=25&size=10")) for _ in range(10)]
        finally:
            await tr.close()

    for ex, sink in run(go):
        assert ex.error is None and sink.status == 200 and ex.bytes_in == 10
        assert 25_000_000 <= sink.t_headers - ex.t_send < 175_000_000


# -- the parser, fed directly (every split point of a response)


class _FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.written += data

    def abort(self) -> None:
        self.aborted = True


def feed(pieces: list[bytes], method: str = "GET", eof: bool = False):
    """Run one response through a _Conn in `pieces`; return (sink, exchange, conn, error)."""

    async def go():
        conn = _Conn(1 << 20, lambda c: None)
        conn.connection_made(_FakeTransport())  # type: ignore[arg-type]
        sink, ex = RecordingSink(), Exchange()
        waiter = conn.request(b"req", method == "HEAD", sink, ex)
        for p in pieces:
            conn.data_received(p)
        if eof:
            conn.connection_lost(None)
        error = None
        if waiter.done():
            error = waiter.exception()
        return sink, ex, conn, error if waiter.done() else "pending"

    return run(go)


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
    b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n"
)
LENGTH = b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n0123456789"


@pytest.mark.parametrize("raw,body", [(CHUNKED, b"hello 0123456789"), (LENGTH, b"0123456789")])
def test_parser_handles_every_split_point(raw: bytes, body: bytes) -> None:
    splits = [[raw[:cut], raw[cut:]] for cut in range(1, len(raw))]
    splits.append([raw[i : i + 1] for i in range(len(raw))])  # one byte per read
    for pieces in splits:
        sink, ex, conn, error = feed(pieces)
        assert error is None, (pieces, error)
        assert sink.body == body and ex.bytes_in == len(body)
        assert sink.t_end and conn.reusable
    if raw is CHUNKED:
        assert sink.status == 200 and sink.headers["x-a"] == "1, 2"


def test_many_whole_chunks_in_one_read() -> None:
    """A read of several whole chunks (what a stream read behind its server holds), sizes in
    either case, with spaces and extensions: each chunk's data once, in order."""
    chunks = b"".join(
        b"%x%s\r\n%s\r\n" % (len(d), ext, d)
        for d, ext in [(b"a" * 26, b""), (b"data: {}\n\n", b" ;x=1"), (b"Z" * 171, b";y")]
    )
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for raw in (head + chunks + b"0\r\n\r\n", head + chunks.upper() + b"0\r\n\r\n"):
        sink, ex, conn, err = feed([raw])
        assert err is None and conn.reusable
        body = b"a" * 26 + b"data: {}\n\n" + b"Z" * 171
        assert sink.body.upper() == body.upper() and ex.bytes_in == len(body)


def test_parser_edge_cases() -> None:
    # 1xx interim response, then the real one; a HEAD response has no body.
    sink, _, conn, err = feed([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"])
    assert err is None and sink.status == 204 and conn.reusable
    sink, _, conn, err = feed([b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"], method="HEAD")
    assert err is None and sink.body == b"" and conn.reusable
    # No framing: the body runs to the close, and the connection is not reused.
    sink, _, conn, err = feed([b"HTTP/1.1 200 OK\r\n\r\nabc", b"def"], eof=True)
    assert err is None and sink.body == b"abcdef" and sink.t_end and not conn.reusable
    # Connection: close and stray bytes after the response both forbid reuse.
    _, _, conn, err = feed([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"])
    assert err is None and not conn.reusable
    _, _, conn, err = feed([LENGTH + b"HTTP/1.1"])
    assert err is None and not conn.reusable
    # Incomplete: still waiting, then a close is a reset.
    _, _, _, err = feed([LENGTH[:-3]])
    assert err == "pending"
    _, ex, conn, err = feed([LENGTH[:-3]], eof=True)
    assert isinstance(err, ConnectionReset) and ex.bytes_in == 7 and not conn.reusable


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTX/1.1 200 OK\r\n",  # fails before the head is complete
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        # int(x, 16) takes these; HTTP does not (the whole-chunk fast path must not either)
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n0123456789abcdef\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nab\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nab\r\n",
    ],
)
def test_parser_rejects_invalid_responses(raw: bytes) -> None:
    _, _, conn, err = feed([raw])
    assert isinstance(err, ProtocolViolation), err
    assert not conn.reusable and conn.transport.aborted  # type: ignore[union-attr]


def test_sink_exception_surfaces_in_send(programmed_server: ProgrammedServer) -> None:
    class Broken(RecordingSink):
        def on_data(self, data: bytes, t_ns: int) -> None:
            raise KeyError("sink bug")

    async def go() -> None:
        tr = make(programmed_server.url, warm_connections=1)
        await tr.open()
        try:
            with pytest.raises(KeyError):
                await tr.send(get("/health"), Broken(), 5, Exchange())
            ex, _ = await send(tr, get("/health"))  # a fresh connection serves the next one
            assert ex.error is None
        finally:
            await tr.close()

    run(go)


def test_same_behaviours_under_uvloop(programmed_server: ProgrammedServer, tls_server) -> None:
    """The engine runs on uvloop: its transports report closes and resets their own way."""
    uvloop = pytest.importorskip("uvloop")

    async def go():
        tr = make(programmed_server.url, warm_connections=2)
        tls = make(tls_server.url, warm_connections=1)
        await tr.open()
        await tls.open()
        try:
            out = {}
            for path in ["/health", "/sse?n=3&every=1", "/garbage", "/reset?bytes=300&tcp=1"]:
                out[path] = await send(tr, get(path))
            out["hang"] = await send(tr, get("/hang"), timeout_s=0.2)
            out["tls"] = await send(tls, get("/sse?n=2&every=1"))
            return out
        finally:
            await tr.close()
            await tls.close()

    out = uvloop.run(go())
    assert out["/health"][0].error is None and out["/health"][1].body == b"ok\n"
    assert out["/sse?n=3&every=1"][1].body.count(b"data:") == 4
    assert isinstance(out["/garbage"][0].error, ProtocolViolation)
    assert isinstance(out["/reset?bytes=300&tcp=1"][0].error, ConnectionReset)
    assert isinstance(out["hang"][0].error, RequestTimeout)
    assert out["tls"][0].error is None and out["tls"][1].body.count(b"data:") == 3


def test_connection_the_server_closed_while_idle_is_not_reused() -> None:
    """A server that drops idle keep-alive connections: the next request opens a fresh one."""

    async def go() -> tuple[list[Exchange], int, int]:
        accepted = 0

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            await r.readuntil(b"\r\n\r\n")
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await w.drain()
            await asyncio.sleep(0.01)  # then an idle timeout, without saying Connection: close
            w.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        tr = make(f"http://127.0.0.1:{port}", warm_connections=1)
        try:
            await tr.open()
            results = []
            for _ in range(3):
                results.append((await send(tr, get("/")))[0])
                await asyncio.sleep(0.05)
            return results, accepted, tr.opened
        finally:
            await tr.close()
            server.close()
            await server.wait_closed()

    results, accepted, opened = run(go)
    assert all(ex.error is None for ex in results), [ex.error for ex in results]
    assert accepted == opened == 3


# ------------------------------------------------------------------ heads seen before
def _heads_through(responses: list[tuple[bytes, str]], heads: dict) -> list[tuple]:
    """Each (response, method) through a fresh _Conn sharing the pool's `heads`; what its sink
    and its framing made of it."""

    async def go():
        seen = []
        for raw, method in responses:
            conn = _Conn(1 << 20, lambda c: None, heads=heads)
            conn.connection_made(_FakeTransport())  # type: ignore[arg-type]
            sink, ex = RecordingSink(), Exchange()
            waiter = conn.request(b"req", method == "HEAD", sink, ex)
            conn.data_received(raw)
            error = waiter.exception() if waiter.done() else "pending"
            seen.append((sink.status, sink.headers, sink.body, conn.reusable, error))
        return seen

    return run(go)


def test_a_head_seen_before_reads_as_it_did_the_first_time() -> None:
    """The second answer with the same head comes from the pool's cache, and reads exactly as
    the first; the answer to a HEAD request with those bytes has no body all the same (it is
    neither taken from the cache nor put in it)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
    heads: dict = {}
    first, second, for_head = _heads_through(
        [(head + b"hello", "GET"), (head + b"world", "GET"), (head, "HEAD")], heads
    )
    assert first == (200, {"content-length": "5", "x-a": "1, 2"}, b"hello", True, None)
    assert second == (200, {"content-length": "5", "x-a": "1, 2"}, b"world", True, None)
    assert for_head == (200, {"content-length": "5", "x-a": "1, 2"}, b"", True, None)
    assert list(heads) == [head[:-4]]


def test_a_bad_head_fails_every_time_and_is_never_kept() -> None:
    bad = b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello"
    heads: dict = {}
    results = _heads_through([(bad, "GET"), (bad, "GET")], heads)
    for status, _, _, reusable, error in results:
        assert status == 0 and not reusable
        assert str(error) == "bad Content-Length '5, 6'"
    assert heads == {}


def test_the_cache_of_heads_stays_bounded() -> None:
    """A server that stamps every head (timing headers) never hits: the cache starts over at
    its bound instead of growing."""
    heads: dict = {}
    responses = [(b"HTTP/1.1 204 No Content\r\nX-T: %d\r\n\r\n" % i, "GET") for i in range(150)]
    results = _heads_through(responses, heads)
    assert [r[0] for r in results] == [204] * 150
    assert [r[1]["x-t"] for r in results] == [str(i) for i in range(150)]
    assert 0 < len(heads) <= MAX_KNOWN_HEADS
