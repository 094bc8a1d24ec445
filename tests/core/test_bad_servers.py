"""A server that hangs, resets, sends garbage or a 20 MB body: each sample gets its error
class, the run finishes and writes its outputs, and no traceback reaches the user."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import write_scenario, zqbench
from tests.servers import ProgrammedServer

pytestmark = pytest.mark.slow  # a zqbench run per misbehaving server

TEN = """
name = "bad"
description = "10 requests"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "1s"
graceful_stop = "5s"
[request]
max_tokens = 4
stream = {stream}
timeout = "1s"
prompt_tokens = 16
"""


@pytest.fixture(scope="module")
def server() -> ProgrammedServer:  # type: ignore[misc]
    with ProgrammedServer() as srv:
        yield srv


@pytest.mark.parametrize(
    ("program", "stream", "error"),
    [
        ("/hang", "true", "timeout"),
        ("/hang?head=1", "true", "timeout"),
        ("/reset?bytes=100", "true", "reset"),
        ("/garbage", "true", "protocol"),
        # 20 MB of "b": read as it arrives, and not JSON (past the body limit: test_too_large)
        ("/big?bytes=20000000", "false", "bad_json"),
        ("/sse?n=3&every=1", "true", "bad_json"),  # `data: {"i": k}` is not a Messages event
        ("/status?code=503", "true", "http_503"),
    ],
)
def test_every_failure_is_a_sample_not_a_crash(
    program: str, stream: str, error: str, server: ProgrammedServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    res = zqbench(
        "run",
        str(write_scenario(tmp_path, TEN.format(stream=stream))),
        "--target",
        server.url,
        "--model",
        "m",
        "-H",
        f"x-program: {program}",
        "--out",
        str(out),
        "--quiet",
        timeout=60,
    )
    assert "Traceback" not in res.stderr + res.stdout
    assert res.returncode in (1, 4), res.stderr  # failed SLOs, or too few samples to judge
    rows = pq.read_table(out / "samples.parquet").to_pylist()
    assert len(rows) == 10
    assert {r["error"] for r in rows} == {error}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["failed"] == 10
