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

from tests.servers.process_group import need_engine

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


def need_h2c(srv: TickServer) -> None:
    """Skip without libnghttp2's headers; under CI=true (.ci/run installs them) fail."""
    missing = "tickserver built without libnghttp2 (apt-get install libnghttp2-dev)"
    need_engine("tick server's h2c", None if srv.h2c else missing)


def _chat(tokens: int) -> dict[str, object]:
    return {"model": "m", "max_tokens": tokens, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip


def test_h2c_streams_both_apis_on_one_connection(tmp_path: Path) -> None:
    """httpx (h2 underneath) with prior knowledge: two streams at once on one connection, each
    the same events as over HTTP/1.1, and the log stamps each token's write."""
    httpx = pytest.importorskip("httpx")
    with TickServer(interval_us=2000, tokens=50, cpu=None, realtime=False, folder=tmp_path) as srv:
        need_h2c(srv)
        with httpx.Client(http1=False, http2=True, base_url=srv.url, timeout=10) as client:
            with (
                client.stream("POST", "/v1/chat/completions", json=_chat(3),
                              headers={"x-request-id": "zq-1"}) as chat,
                client.stream("POST", "/v1/messages", json=_chat(4),
                              headers={"x-request-id": "zq-2"}) as msgs,
            ):  # fmt: skip
                responses = [(r, r.read().decode()) for r in (chat, msgs)]
            models = client.get("/v1/models")
        srv.stop()
        log = srv.log()
    assert models.http_version == "HTTP/2" and models.json()["data"][0]["id"] == "mock"
    for r, _ in responses:
        assert r.http_version == "HTTP/2" and r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
    assert [r.headers["x-request-id"] for r, _ in responses] == ["zq-1", "zq-2"]
    chat_lines = [line for line in responses[0][1].split("\n") if line.startswith("data: ")]
    assert chat_lines[-1] == "data: [DONE]"
    contents = [json.loads(x[6:])["choices"][0]["delta"].get("content") for x in chat_lines[1:4]]
    assert contents == [" the"] * 3
    events = [x[7:] for x in responses[1][1].split("\n") if x.startswith("event: ")]
    assert events == ["message_start", "content_block_start", "ping",
                      *["content_block_delta"] * 4,
                      "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
    by_id = {r["x_request_id"]: r for r in log.requests}
    per = log.per_request()
    assert [len(per[by_id[rid]["seq"]]) for rid in ("zq-1", "zq-2")] == [3, 4]
    for rid in ("zq-1", "zq-2"):
        times = per[by_id[rid]["seq"]]
        assert times[0] > by_id[rid]["t_head_ns"] >= by_id[rid]["t_recv_ns"]
        assert (np.diff(times) > 0).all()
    assert not (log.tokens["idx"] & DEFERRED).any()


def test_zqbench_over_h2c_has_a_row_and_every_token_for_each_request(tmp_path: Path) -> None:
    """zqbench --http2 against the tick server: each request the server logged has its row,
    with the token count the server wrote, over HTTP/2."""
    import subprocess

    import pyarrow.parquet as pq

    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "h2"\napi = "openai"\n[load]\nexecutor = "constant-vus"\nvus = 4\n'
        'duration = "1s"\n[request]\nmax_tokens = 20\nstream = true\nprompt_tokens = 8\n'
    )
    with TickServer(interval_us=2000, tokens=50, cpu=None, realtime=False, folder=tmp_path) as srv:
        need_h2c(srv)
        run = subprocess.run(
            [sys.executable, "-m", "zqbench", "run", str(scenario), "--target", srv.url,
             "--http2", "--model", "mock", "--calibration", "off", "--no-server-metrics",
             # What is tested is the join and the counts. On a busy machine (the suite's other
             # workers) 1 s of 4 users sent 71-88 requests, under the default 100 of a valid
             # run (exit 4); and a loop held back is test_client_lag.py's to judge.
             "--max-client-lag", "60s", "--min-samples", "1",
             "--quiet", "--out", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        srv.stop()
        log = srv.log()
    assert run.returncode == 0, run.stdout + run.stderr
    rows = pq.read_table(tmp_path / "out" / "samples.parquet").to_pylist()
    per = log.per_request()
    served = {r["x_request_id"]: len(per.get(r["seq"], [])) for r in log.requests}
    assert len(rows) >= 8
    for row in rows:
        assert row["http_version"] == "2" and row["error"] is None, row
        assert served[f"zq-{row['request_id']}"] == row["output_tokens"] == 20
