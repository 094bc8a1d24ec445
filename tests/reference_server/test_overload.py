"""Past capacity: zero-queue refuses the excess at once; fifo answers everything, late."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time

import httpx
import pytest

from tests.reference_server.conftest import MODEL, Server, start_server

N_REQUESTS = 24  # six times the four slots
BODY = {
    "model": MODEL,
    "max_tokens": 60,
    "stream": True,
    "messages": [{"role": "user", "content": "overload"}],
}


async def _raw_request(
    host: str, port: int, body: bytes, go: asyncio.Event
) -> tuple[int, float, dict[str, str]]:
    """One HTTP/1.1 request on a connection opened beforehand, so that timing starts at the
    send, not at connection setup: (status, seconds to the end of the response, headers)."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    await go.wait()
    t0 = time.perf_counter()
    writer.write(head + body)
    data = await reader.read()  # connection: close -> the server closes after the response
    elapsed = time.perf_counter() - t0
    writer.close()
    await writer.wait_closed()
    lines = data.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), elapsed, headers


async def _burst(
    url: str, scrape: bool = False
) -> tuple[list[tuple[int, float, dict[str, str]]], list[float]]:
    """Fire N_REQUESTS at once: (status, seconds, headers) each, and waiting-gauge samples."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(BODY).encode()
    go = asyncio.Event()
    tasks = [
        asyncio.create_task(_raw_request(host, int(port), body, go)) for _ in range(N_REQUESTS)
    ]
    await asyncio.sleep(0.2)  # let every connection open
    go.set()
    waiting: list[float] = []
    if scrape:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            for _ in range(20):
                await asyncio.sleep(0.02)
                text = (await client.get("/metrics")).text
                m = re.search(r"^refserver_num_requests_waiting (\S+)$", text, re.M)
                waiting.append(float(m.group(1)) if m else -1.0)
    return list(await asyncio.gather(*tasks)), waiting


@pytest.mark.slow
def test_zero_queue_refuses_excess_fast(zq_server: Server) -> None:
    """Excess requests get 529 within milliseconds, with Retry-After and no dispatch header;
    the admitted ones all take about the same time (P99/P50 near 1)."""
    results, _ = asyncio.run(_burst(zq_server.url))
    ok = [(s, t, h) for s, t, h in results if s == 200]
    refused = [(s, t, h) for s, t, h in results if s != 200]
    assert {s for s, _, _ in refused} <= {529}
    assert len(refused) >= N_REQUESTS // 2 and len(ok) >= 4
    reject_times = sorted(t for _, t, _ in refused)
    assert reject_times[len(reject_times) // 2] < 0.05  # median refusal well under a step train
    for _, _, h in refused:
        assert h["retry-after"] == "1" and h["x-should-retry"] == "false"
        assert "x-request-received-time" in h and "x-request-dispatch-time" not in h
    for _, _, h in ok:
        queue = float(h["x-request-dispatch-time"]) - float(h["x-request-received-time"])
        assert 0 <= queue < 0.005  # dispatch is the slot reservation, at arrival
    lat = sorted(t for _, t, _ in ok)
    assert lat[-1] / statistics.median(lat) < 1.5


@pytest.mark.slow
def test_fifo_answers_all_late_with_visible_queue() -> None:
    """fifo serves every request, the late ones after waiting in a queue that /metrics and
    the timing headers both show."""
    server = start_server("--engine", "sim", "--scheduler", "fifo", "--max-batch-size", "4")
    try:
        results, waiting = asyncio.run(_burst(server.url, scrape=True))
    finally:
        server.stop()
    assert all(s == 200 for s, _, _ in results)
    assert max(waiting) >= 4
    queues = sorted(
        float(h["x-request-dispatch-time"]) - float(h["x-request-received-time"])
        for _, _, h in results
    )
    assert queues[-1] > 0.2  # the last batch waited for five batches ahead of it
    lat = sorted(t for _, t, _ in results)
    assert lat[-1] / statistics.median(lat) > 1.3
