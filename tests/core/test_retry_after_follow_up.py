"""Retry-After follow-ups against a server's truth: each followed refusal is sent again when
its Retry-After said (never before), the share admitted then is the server's, a server whose
Retry-After lies gets none honoured, and none of the tries is a sample.

The programmed server refuses every third request it counts (503, Retry-After: 1); with
`lie`, it also refuses every try (the request ids zqbench gives them end `-retryN`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import run_programmed

SCENARIO = """
name = "follow-ups"
api = "anthropic"
[validity]
max_schedule_lag = "500ms"
[outcomes]
at_rest_probes = 0
retry_after_follow_ups = 12
retry_after_attempts = 3
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "7s"
graceful_stop = "2s"
[request]
max_tokens = 4
prompt_tokens = 8
"""
PROGRAM = "x-program: /anthropic?n=4&every=2&first=5&head=1&refuse_every=3"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, program: str):  # type: ignore[no-untyped-def]
    result, truth = run_programmed(tmp_path, SCENARIO, program)
    table = pq.read_table(result.out_dir / "samples.parquet")
    start = int(table.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    tries = pq.read_table(result.out_dir / "retry_after.parquet").to_pylist()
    return result, table.to_pylist(), tries, truth["truth"], start


def test_tries_go_out_when_retry_after_said_and_are_kept_apart(tmp_path: Path) -> None:
    result, rows, tries, truth, start = _run(tmp_path, PROGRAM)
    section = result.summary.retry_after_follow_up
    assert section is not None
    assert len(rows) == 140  # 20 req/s for 7 s: the tries are not samples
    assert not any("-retry" in k for k in (f"zq-{r['request_id']}" for r in rows))
    assert section.asked == 12 and section.followed == 12
    sent = [t for t in tries if t["t_send"] is not None]
    assert section.extra_requests == len(sent) >= 12
    for t in sent:
        seen = truth[f"zq-{t['request_id']}-retry{t['attempt']}"]
        # Never before the Retry-After's moment, and answered as the server says it did.
        assert seen["t_recv"] >= t["t_due"] + start
        assert t["status"] == (503 if seen["outcome"] == "refused" else 200)
        if t["attempt"] == 1:
            refused = truth[f"zq-{t['request_id']}"]
            assert refused["outcome"] == "refused"
            assert t["t_due"] + start >= refused["t_end"] + 1_000_000_000 - 5_000_000
    first = [t for t in tries if t["attempt"] == 1 and t["t_send"] is not None]
    admitted_first = sum(1 for t in first if t["status"] == 200)
    assert section.honoured == admitted_first
    assert section.honoured_share == pytest.approx(admitted_first / section.tried)
    assert section.honoured_share >= 0.5  # a third of the server's count is refused
    assert section.send_late_p99 is not None and section.send_late_p99 < 0.2
    saved = json.loads((result.out_dir / "summary.json").read_text())
    assert saved["retry_after_follow_up"]["extra_requests"] == section.extra_requests
    assert not list(result.out_dir.glob("retry_after.w*.jsonl"))
    text = (result.out_dir / "summary.md").read_text()
    assert (
        f"Retry-After honoured: {section.honoured} of {section.tried} followed refusals "
    ) in text
    assert f"; {section.extra_requests} extra requests (up to 3 tries each" in text
    print(f"honoured {section.honoured} of {section.tried}, late p99 {section.send_late_p99}")


def test_a_retry_after_that_lies_gets_nothing_honoured(tmp_path: Path) -> None:
    result, _, tries, truth, _ = _run(tmp_path, PROGRAM + "&lie=1")
    section = result.summary.retry_after_follow_up
    assert section is not None
    assert section.honoured == 0 and section.honoured_share == 0.0
    assert section.admitted_later == 0 and section.to_admission == []
    assert section.refused_throughout + section.ended_with_run == section.followed == 12
    assert section.refused_throughout >= 6
    sent = [t for t in tries if t["t_send"] is not None]
    assert all(t["status"] == 503 for t in sent)
    assert all(
        truth[f"zq-{t['request_id']}-retry{t['attempt']}"]["outcome"] == "refused" for t in sent
    )
    # Followed up to three times: the later tries follow the refusals of the earlier ones.
    assert max(t["attempt"] for t in tries) == 3
