"""Client stamps match the server's ground truth (same CLOCK_MONOTONIC) under moderate load."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from tests.servers import ProgrammedServer, RecordingSink
from tests.transport.util import KINDS, MAX_MEDIAN_GAP_NS, get, make, run
from zqbench.transport.base import Exchange

STREAMS, TOKENS, EVERY_MS = 20, 20, 10


@pytest.mark.parametrize("kind", KINDS)
def test_stream_stamps_follow_the_server_send_times(
    kind: str, programmed_server: ProgrammedServer
) -> None:
    """20 concurrent SSE streams x 20 events, 10 ms apart (~2000 events/s): every client stamp
    is at or after the server's write, and the median gap is small (see MAX_MEDIAN_GAP_NS)."""
    path = f"/sse?n={TOKENS}&every={EVERY_MS}&first=5&head=2"

    async def go() -> list[tuple[str, Exchange, RecordingSink]]:
        tr = make(kind, programmed_server.url, warm_connections=STREAMS)
        await tr.open()
        try:

            async def one(i: int) -> tuple[str, Exchange, RecordingSink]:
                rid = f"timing-{kind}-{i}"
                sink = RecordingSink()
                await asyncio.sleep(i * 0.002)  # stagger, as an open-loop schedule would
                ex = await tr.send(get(path, rid), sink, 10, Exchange())
                return rid, ex, sink

            return await asyncio.gather(*(one(i) for i in range(STREAMS)))
        finally:
            await tr.close()

    results = run(go)
    head_gaps, data_gaps = [], []
    for rid, ex, sink in results:
        assert ex.error is None
        truth = programmed_server.truth(rid)
        assert truth is not None and truth["outcome"] == "ok"
        assert ex.t_send <= truth["t_recv"]
        head_gaps.append(sink.t_headers - truth["t_head"])
        body = sink.body
        ends, pos = [], 0
        while (pos := body.find(b"\n\n", pos) + 2) > 1:
            ends.append(pos)
        assert len(ends) == len(truth["t_chunks"]) == TOKENS + 1
        for end, t_server in zip(ends, truth["t_chunks"], strict=True):
            data_gaps.append(sink.time_of_byte(end - 1) - t_server)
        assert sink.t_end >= sink.chunks[-1][0]
    assert min(head_gaps) >= 0 and min(data_gaps) >= 0  # never before the server sent it
    medians_ms = [statistics.median(gaps) / 1e6 for gaps in (head_gaps, data_gaps)]
    assert max(medians_ms) < MAX_MEDIAN_GAP_NS / 1e6, f"median gap head, data: {medians_ms} ms"


@pytest.mark.parametrize("kind", KINDS)
def test_ttfb_is_at_least_the_programmed_delay(kind: str, programmed_server: ProgrammedServer):
    async def go() -> list[tuple[Exchange, RecordingSink]]:
        tr = make(kind, programmed_server.url, warm_connections=4)
        await tr.open()
        try:
            out = []
            for i in range(10):
                sink = RecordingSink()
                req = get("/delay?ms=25&size=10", f"ttfb-{kind}-{i}")
                ex = await tr.send(req, sink, 5, Exchange())
                out.append((ex, sink))
            return out
        finally:
            await tr.close()

    for ex, sink in run(go):
        assert ex.error is None and sink.status == 200 and ex.bytes_in == 10
        ttfb = sink.t_headers - ex.t_send
        assert 25_000_000 <= ttfb < 175_000_000  # upper bound: sanity only (shared CPUs)
