"""A sessions run end to end against the reference server: every turn carries the last.

The reference server counts a prompt as BOS + the UTF-8 bytes of every message joined with
newlines, and answers one byte a token, so each turn's usage is the last turn's prompt,
plus its answer, plus the new message and two newlines, exactly.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.core.conftest import MODEL
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer


def test_each_turn_carries_the_conversation_and_the_summary_splits_by_turn(
    ref_server: EmbeddedServer, tmp_path
) -> None:
    result = run_scenario(
        RunOptions.of(
            scenario="sessions",
            target=ref_server.base_url,
            model=MODEL,
            rate_scale=4.0,  # 4 sessions a second
            duration_scale=0.1,  # for 2 s: 8 sessions of 4 turns
            out=tmp_path / "run",
            calibration="off",
            min_samples=20,
            api="openai",
        )
    )
    samples = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    by_session: dict[int, dict[int, dict]] = {}
    for s in samples:
        assert s["error"] is None
        by_session.setdefault(s["session"], {})[s["turn"]] = s
    assert len(by_session) == 8 and all(len(t) == 4 for t in by_session.values())
    for turns in by_session.values():
        message = turns[0]["prompt_tokens"] - 1  # the first turn: BOS + its message
        for k in range(1, 4):
            last = turns[k - 1]
            assert turns[k]["prompt_tokens"] == (
                last["prompt_tokens"] + last["output_tokens"] + message + 2
            )
            assert turns[k]["request_id"] == turns[0]["request_id"] + k
        assert [turns[k]["t_intended"] is None for k in range(4)] == [False, True, True, True]
    sessions = result.summary.sessions
    assert sessions is not None
    assert (sessions.turns, sessions.sessions, sessions.completed) == (4, 8, 8)
    means = [t.prompt_tokens_mean for t in sessions.by_turn]
    assert means == sorted(means) and means[0] == 128
    assert "### Sessions" in (result.out_dir / "summary.md").read_text()
    assert "<h2>Sessions</h2>" in (result.out_dir / "report.html").read_text()
