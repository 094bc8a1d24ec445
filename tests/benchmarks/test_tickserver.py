"""benchmarks/tickserver.c speaks both streamed APIs as zqbench's dialects expect, and logs
every token write (benchmarks/client_overhead.py compares clients with that log).

Correctness only, not timed: a 2 ms tick, three tokens a request."""

from __future__ import annotations

import http.client
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from tickserver import DEFERRED, TickServer

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def post(srv: TickServer, path: str, body: dict[str, object], rid: str) -> list[str]:
    """The response's SSE `data:` lines (and `event:` lines), in order."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request(
            "POST",
            path,
            json.dumps(body),
            {"content-type": "application/json", "x-request-id": rid},
        )
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("content-type") == "text/event-stream"
        assert resp.getheader("transfer-encoding") == "chunked"
        text = resp.read().decode()
    finally:
        conn.close()
    assert text.endswith("\n\n")
    return [line for line in text.split("\n") if line]


def test_both_apis_and_the_log(tmp_path: Path) -> None:
    with TickServer(interval_us=2000, tokens=50, cpu=None, realtime=False, folder=tmp_path) as srv:
        chat = post(
            srv,
            "/v1/chat/completions",
            {
                "model": "m",
                "max_tokens": 3,
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "hi"}],
            },
            "zq-1",
        )
        msgs = post(
            srv,
            "/v1/messages",
            {
                "model": "m",
                "max_tokens": 3,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
            "zq-2",
        )
        srv.stop()
        log = srv.log()

    # OpenAI: role chunk, three content chunks, the finish chunk, the usage chunk, [DONE].
    assert chat[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: ") :]) for line in chat[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:4]]
    assert contents == [" the"] * 3
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5]["choices"] == [] and chunks[5]["usage"]["completion_tokens"] == 3

    # Anthropic: the event names and their data's types agree, in the Messages API's order.
    events = [line[len("event: ") :] for line in msgs if line.startswith("event: ")]
    datas = [json.loads(line[len("data: ") :]) for line in msgs if line.startswith("data: ")]
    assert events == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [d["type"] for d in datas] == events
    assert [d["delta"]["text"] for d in datas[3:6]] == [" the"] * 3
    assert datas[7]["usage"]["output_tokens"] == 3
    assert datas[0]["message"]["model"] == "m"

    # The log: both requests by x-request-id, three stamped writes each, on three ticks due one
    # interval apart or more. Not the writes' own stamps: a tick handled late (this machine
    # busy) writes late, and the next, on time, 0.87 ms after it (a clean-clone run's failure).
    by_id = {r["x_request_id"]: r for r in log.requests}
    assert set(by_id) == {"zq-1", "zq-2"}
    per = log.per_request()
    for rid in ("zq-1", "zq-2"):
        r = by_id[rid]
        assert r["tokens"] == 3
        times = per[r["seq"]]
        assert len(times) == 3
        assert times[0] > r["t_head_ns"] >= r["t_recv_ns"]
        assert (np.diff(times) > 0).all()
        # Each write belongs to the last tick handled (due + lateness) before it.
        handled = log.ticks[:, 0] + log.ticks[:, 1]
        order = np.argsort(handled)
        tick = order[np.searchsorted(handled[order], times, side="right") - 1]
        assert (handled[tick] <= times).all()
        assert (np.diff(log.ticks[tick, 0]) >= 2_000_000).all(), (times, log.ticks[tick])
    assert not (log.tokens["idx"] & DEFERRED).any()
    assert len(log.ticks) > 0
