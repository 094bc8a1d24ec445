"""Verdicts that hold on a reasoning model (#42 item 2). A server that thinks 48 tokens before
every answer (the reference server's `--thinking-tokens`) is judged `served` at rest: TTFT
is its first token of any kind, and the at-rest probes measure that same first token, so the
thinking phase is never read as a queue. Its fifo twin with two slots, loaded past them,
is judged `queued`: the verdict still sees a real queue. Both run with
`--no-timing-headers`, so the first token is the only evidence, as on vLLM.

Before #42 TTFT was the first *text* token: the probes (4 tokens, all thinking) found no
token at all, and every request under load would have counted its thinking as waiting.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL
from zqbench.dialects.base import OMITTED, TEXT, THINKING
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.summary import AtRest
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow

SCENARIO = """
name = "thinking"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = {rate}
duration = "3s"
[request]
max_tokens = 64
prompt_tokens = 32
timeout = "30s"
[validity]
min_samples = 10
max_schedule_lag = "250ms"
"""


def _run(scheduler: str, slots: int, rate: int, out: Path, *shown: str):  # type: ignore[no-untyped-def]
    with EmbeddedServer(
        engine="sim",
        scheduler=scheduler,
        max_batch_size=slots,
        # Silent about its queue, as vLLM is: the first token is the only evidence.
        extra_args=("--thinking-tokens", "48", "--no-timing-headers", *shown),
        log_path=out.with_suffix(".log"),
    ) as server:
        scenario = out.with_suffix(".toml")
        scenario.write_text(SCENARIO.format(rate=rate))
        # No report.html: nothing here reads it, and its figures cost about 3 s of CPU a run.
        options = RunOptions.of(
            scenario=str(scenario), target=server.base_url, model=MODEL, out=out, html=False
        )
        return run_scenario(options).summary


def test_a_thinking_phase_is_served_and_a_real_queue_is_still_queued(tmp_path: Path) -> None:
    calm = _run("zero-queue", 8, 5, tmp_path / "calm")
    assert calm.outcomes is not None
    at_rest = calm.outcomes.basis.at_rest
    assert isinstance(at_rest, AtRest), at_rest
    counts = calm.outcomes.counts
    assert counts.get("served", 0) == calm.requests.sent and counts.get("queued", 0) == 0, counts
    assert calm.outcomes.evidence.get("ttft") == calm.requests.sent, calm.outcomes.evidence
    # TTFT is the first thinking token: far below the 48 thinking steps plus the answer.
    assert calm.metrics["ttft"].p99 < 0.5 * calm.metrics["latency"].p50
    # The run says so: every answer thought, 48 tokens counted (no usage count on this API),
    # and the answer came later than the first token by the thinking's 48 steps.
    r = calm.reasoning
    assert r is not None and r.thinking_requests == r.requests == calm.requests.ok, r
    assert r.reasoning_tokens_mean == 48 and r.reasoning_tokens_counted == r.requests
    assert (r.redacted, r.unanswered, r.tool_requests, r.tool_calls) == (0, 0, 0, 0)
    ttfa, ttft = calm.metrics["ttfa"], calm.metrics["ttft"]
    assert r.thinking_p50 is not None and ttfa.p50 > ttft.p50 + 0.5 * r.thinking_p50
    # Each row says what its stream carried: 48 thinking tokens counted (the Messages API
    # gives no count of its own), then the text; its first answer token after the thinking.
    rows = pq.read_table(tmp_path / "calm" / "samples.parquet").to_pylist()
    ok = [r for r in rows if r["error"] is None]
    assert ok and all(
        r["carried"] == THINKING | TEXT
        and r["reasoning_tokens"] == 48
        and not r["reasoning_from_usage"]
        and r["tool_calls"] == 0
        and r["t_first_token"] < r["t_first_answer"] <= r["t_last_token"]
        and r["n_chunks"] == r["output_tokens"] == 64
        for r in ok
    ), ok[0]
    busy = _run("fifo", 2, 60, tmp_path / "busy")
    assert busy.outcomes is not None
    assert busy.outcomes.counts.get("queued", 0) > 0.5 * busy.requests.sent, busy.outcomes.counts


def test_thinking_the_server_does_not_show_is_served_too(tmp_path: Path) -> None:
    """The newest Claude models stream a thinking block with only its signature (display
    omitted): its start is the first token, so 48 hidden thinking steps are no queue either;
    the run counts no thinking tokens (none were shown) and says the thinking was omitted."""
    calm = _run("zero-queue", 8, 5, tmp_path / "calm", "--thinking-display", "omitted")
    assert calm.outcomes is not None
    counts = calm.outcomes.counts
    assert counts.get("served", 0) == calm.requests.sent and counts.get("queued", 0) == 0, counts
    assert calm.metrics["ttft"].p99 < 0.5 * calm.metrics["latency"].p50
    r = calm.reasoning
    assert r is not None and r.thinking_requests == r.omitted == r.requests == calm.requests.ok
    assert r.reasoning_tokens_mean is None and r.redacted == 0
    rows = pq.read_table(tmp_path / "calm" / "samples.parquet").to_pylist()
    ok = [r for r in rows if r["error"] is None]
    assert ok and all(
        r["carried"] == THINKING | OMITTED | TEXT
        and r["reasoning_tokens"] is None
        and r["n_chunks"] == 64 - 48 + 1  # the hidden thinking is one event
        and r["t_first_token"] < r["t_first_answer"]
        for r in ok
    ), ok[0]
