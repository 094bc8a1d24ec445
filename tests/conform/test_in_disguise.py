"""A refusal in disguise, end to end: a target that refuses with `200 text/event-stream` and
the overload error inside, before any token (the fake's refuse_in_stream faults, vLLM's bytes
among them), is shown by `zqbench run` and `zqbench conform` as `refused_in_stream`, by name
and with the count the server itself made, on both APIs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conform.fake_server import MODEL, FakeServer
from tests.core.conftest import zqbench
from tests.dialects.frames import VLLM_REFUSAL_ANTHROPIC, VLLM_REFUSAL_WORDS
from zqbench.cli import app

pytestmark = pytest.mark.slow

# Every zeroqueue check but the burst's first two (--only takes groups, --skip ids).
SKIPPED = [a for i in (*range(1, 6), *range(8, 14)) for a in ("--skip", f"zeroqueue.{i}")]
PHRASE = "a refusal in disguise: 2xx, overload error inside"
# Past the fake's 2 slots (16 tokens at 3 ms each: about 40 answers a second) at once.
PULSE = """
name = "pulse"
api = "{api}"
[load]
executor = "constant-arrival-rate"
rate = 80
duration = "1s"
graceful_stop = "3s"
[request]
max_tokens = 16
prompt_tokens = 8
[validity]
min_samples = 10
max_schedule_lag = "500ms"
[outcomes]
at_rest_probes = 1
"""


@pytest.mark.parametrize(
    ("fault", "api"),
    [
        ("refuse_in_stream_vllm", "openai"),
        ("refuse_in_stream_vllm", "anthropic"),
        ("refuse_in_stream", "anthropic"),
    ],
)
def test_a_run_counts_each_refusal_in_disguise_by_name(
    fault: str, api: str, tmp_path: Path
) -> None:
    scenario = tmp_path / "pulse.toml"
    scenario.write_text(PULSE.format(api=api))
    out = tmp_path / "run"
    with FakeServer({fault}) as srv:
        result = zqbench(
            "run", str(scenario), "--target", srv.base_url, "--model", MODEL,
            "--calibration", "off", "--out", str(out),
            env={"ZQBENCH_CALIBRATION": str(tmp_path / "calibration.json")},
        )  # fmt: skip
        refused = srv.refusals
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    counts = summary["outcomes"]["counts"]
    # Every refusal the server made is one refused_in_stream: none a failure, none served.
    assert refused >= 10, (refused, counts)
    assert counts["refused_in_stream"] == refused, counts
    assert counts["refused_fast"] == counts["refused_slow"] == counts["failed"] == 0, counts
    assert summary["status_codes"]["200:refused_in_stream"] == refused
    assert summary["retry_after"]["refusals"] == refused
    assert summary["metrics"]["time_to_reject"]["n"] == refused
    sent, served = summary["requests"]["sent"], counts["served"] + counts["queued"]
    assert served + refused + counts["undetermined"] == sent, counts
    # The terminal names them, with their count, in the headline and the outcome line.
    assert f"refused {refused:,} ({refused:,} in disguise as 2xx)" in result.stdout
    assert f"refused in stream {refused:,} (each {PHRASE})" in result.stdout
    md = (out / "summary.md").read_text()
    share = f"{refused / sent:.2%}"
    assert f"| `200:refused_in_stream` ({PHRASE}) | {refused:,} | {share} |" in md
    assert f"refused_in_stream {refused:,}: each {PHRASE}" in md
    page = (out / "report.html").read_text()
    assert f"<tr><td><code>200:refused_in_stream</code> ({PHRASE})</td>" in page


def _anthropic_words() -> str:
    """vLLM's Anthropic message as .7 shows it: the 200 characters kept of it, cut to 120
    and its newlines escaped, never obeyed."""
    data = VLLM_REFUSAL_ANTHROPIC.split(b"data: ", 1)[1]
    message = json.loads(data)["error"]["message"][:200]
    return message[:120].replace("\n", "\\x0a") + "... (80 more characters)"


@pytest.mark.parametrize(
    ("fault", "api", "words"),
    [
        ("refuse_in_stream", "openai", "full"),
        ("refuse_in_stream_vllm", "openai", VLLM_REFUSAL_WORDS),  # whole: 115 characters
        ("refuse_in_stream_vllm", "anthropic", _anthropic_words()),
    ],
)
def test_conform_fails_zeroqueue_7_with_the_count_and_the_servers_words(
    fault: str, api: str, words: str, tmp_path: Path
) -> None:
    with FakeServer({fault}) as srv:
        result = CliRunner().invoke(
            app,
            [
                "conform", "--target", srv.base_url, "--only", "zeroqueue", *SKIPPED,
                "--api", api, "--overload-concurrency", "6", "--json",
                str(tmp_path / "conform.json"),
            ],
        )  # fmt: skip
        refused = srv.refusals
    assert result.exit_code == 1, result.output
    doc = json.loads((tmp_path / "conform.json").read_text())
    checks = {c["id"]: c for c in doc["checks"]}
    assert checks["zeroqueue.6"]["status"] == "pass"
    seven = checks["zeroqueue.7"]
    counts = seven["evidence"]["counts"]
    # 6 at once against 2 slots: 4 refused, each in disguise; the server says as much.
    assert counts == {"admitted": 2, "refused_in_stream": 4} and refused == 4, counts
    assert seven["status"] == "fail"
    assert seven["reason"] == (
        "4 of 4 refusals came in disguise: 200 text/event-stream with the server's overload "
        f'error inside, before any token ("{words}")'
    )
    assert seven["evidence"]["in_disguise"] == {
        "count": 4,
        "status": 200,
        "content_type": "text/event-stream",
        "server_says": words,
    }
    assert "FAIL  zeroqueue.7      4 of 4 refusals came in disguise: 200 text/event-stream" in (
        result.output
    )
