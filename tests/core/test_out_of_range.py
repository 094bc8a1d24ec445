"""#25 item 7: a number from the target that no int64 column holds (usage 10^30) broke the
Arrow flush: exit 5 and 0 rows for 20 sent. Every request is a row now, marked out_of_range."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import zqbench_here
from tests.servers.in_thread import read_body, send_json, serve
from zqbench.pipeline.run import RunOptions, RunResult, run_scenario
from zqbench.scenario import load_scenario

SCENARIO = """
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "1s"
[request]
stream = false
max_tokens = 8
[validity]
min_samples = 5
"""


def _completion(*, completion_tokens: int) -> dict[str, object]:
    """A chat completion of "hi" from 5 prompt tokens."""
    usage = {"prompt_tokens": 5, "completion_tokens": completion_tokens,
             "total_tokens": 5 + completion_tokens}  # fmt: skip
    message = {"role": "assistant", "content": "hi"}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip


def _run(tmp_path: Path, url: str) -> RunResult:
    """SCENARIO against `url`, the OpenAI API, no calibration and no server metrics."""
    path = tmp_path / "tiny.toml"
    path.write_text(SCENARIO)
    options = RunOptions.of(
        scenario=load_scenario(str(path)), target=url, api="openai", model="m",
        calibration="off", out=tmp_path / "run", server_metrics=False,
    )  # type: ignore[arg-type]  # fmt: skip
    return run_scenario(options)


class _Huge(BaseHTTPRequestHandler):
    """A chat completion whose usage says 10^30 output tokens."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        read_body(self)
        send_json(self, 200, _completion(completion_tokens=10**30))

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def huge_url() -> Iterator[str]:
    with serve(_Huge) as url:
        yield url


def test_a_usage_count_past_int64_keeps_every_row(huge_url: str, tmp_path: Path) -> None:
    result = _run(tmp_path, huge_url)
    rows = pq.read_table(result.out_dir / "samples.parquet").to_pandas()
    assert len(rows) == result.summary.requests.sent == 20
    assert set(rows["error"]) == {"out_of_range"}
    assert rows["output_tokens"].isna().all() and (rows["prompt_tokens"] == 5).all()
    assert result.summary.status_codes == {"200:out_of_range": 20}


class _FarClock(BaseHTTPRequestHandler):
    """Timing headers of 1e308 epoch seconds: finite, but no server's clock (#25 item 8)."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        read_body(self)
        body = json.dumps(_completion(completion_tokens=1)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for name in ("Received", "Dispatch", "Start"):
            self.send_header(f"X-Request-{name}-Time", "1e308")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def test_timing_headers_past_any_clock_read_as_absent_and_the_report_renders(
    tmp_path: Path,
) -> None:
    with serve(_FarClock) as url:
        result = _run(tmp_path, url)
    rows = pq.read_table(result.out_dir / "samples.parquet").to_pandas()
    assert len(rows) == 20 and rows["error"].isna().all()
    assert rows[["srv_received", "srv_dispatch", "srv_start"]].isna().all().all()
    assert (result.out_dir / "report.html").stat().st_size > 0
    assert result.summary.metrics["dispatch_delay"].unavailable is not None


def test_a_pass_without_slos_says_the_failures_went_unjudged(huge_url: str, tmp_path: Path) -> None:
    """#25 item 18: every request failed, no SLO set, exit 0: the verdict line says why."""
    path = tmp_path / "tiny.toml"
    path.write_text(SCENARIO)
    args = ["run", str(path), "--target", huge_url, "--api", "openai", "--model", "m"]
    args += ["--calibration", "off", "--no-server-metrics", "--quiet", "--out", str(tmp_path / "r")]
    args += ["--max-schedule-lag", "1s"]  # about the verdict line, not the generator's timing
    result = zqbench_here(*args)
    assert result.returncode == 0, result.stderr
    assert "verdict: PASS   requests: sent 20: served 0, refused 0, failed 20" in result.stdout
    assert (
        "  no SLO was set: the verdict checks none of the 20 failed requests (add e.g. "
        "--slo 'errors:rate<0.01')" in result.stdout
    )
