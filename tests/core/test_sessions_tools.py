"""Sessions that call tools, end to end against the reference server (#42 item 4): a turn
after a call sends the call and its result, the server takes both on either API, and each
conversation is an agent's loop of calls to its last turn.

The reference server counts a prompt as BOS + the UTF-8 bytes of every message's text joined
with newlines: on the chat-completions route an assistant's call has no text (its content is
null) and a tool result's text is its content, so each turn after a call adds the result and
two newlines, exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL
from zqbench.dialects.base import TOOL
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer

SCENARIO = """
name = "agent"
api = "{api}"
[load]
executor = "sessions"
rate = 4
duration = "2s"
turns = 3
[request]
prompt_tokens = 40
max_tokens = 24
tools = "tools.json"
tool_choice = "lookup"
"""


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_each_turn_after_a_call_sends_its_result_and_the_server_takes_it(
    ref_server: EmbeddedServer, tmp_path: Path, api: str
) -> None:
    (tmp_path / "tools.json").write_text(
        json.dumps([{"name": "lookup", "parameters": {"properties": {"q": {"type": "string"}}}}])
    )
    (tmp_path / "agent.toml").write_text(SCENARIO.format(api=api))
    result = run_scenario(
        RunOptions.of(
            scenario=str(tmp_path / "agent.toml"),
            target=ref_server.base_url,
            model=MODEL,
            out=tmp_path / "run",
            calibration="off",
            min_samples=20,
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )
    samples = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    by_session: dict[int, dict[int, dict]] = {}
    for s in samples:
        assert s["error"] is None and s["status"] == 200, s
        assert (s["tool_calls"], s["carried"], s["output_tokens"]) == (1, TOOL, 24)
        by_session.setdefault(s["session"], {})[s["turn"]] = s
    assert len(by_session) == 8 and all(len(t) == 3 for t in by_session.values())
    sessions = result.summary.sessions
    assert sessions is not None and (sessions.sessions, sessions.completed) == (8, 8)
    for turns in by_session.values():
        message = turns[0]["prompt_tokens"] - 1  # BOS + the first message
        for k in (1, 2):
            grown = turns[k]["prompt_tokens"] - turns[k - 1]["prompt_tokens"]
            if api == "openai":
                assert grown == message + 2  # the result; the call has no text
            else:  # the call's input as JSON text besides
                assert grown > message + 2 + len('{"q": ""}')
