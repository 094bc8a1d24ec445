"""The tool-calling workload (#42 item 4): scenarios/tool-calls.toml against the reference
server, whose model calls the tool it is named; every answer is one call, counted exactly,
and the source travels to a distributed worker with its offer."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL
from zqbench.dialects.base import TEXT, TOOL
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.scenario import load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.offer import OfferSource
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_every_answer_is_one_call_of_the_named_tool(
    ref_server: EmbeddedServer, tmp_path: Path, api: str
) -> None:
    out = tmp_path / api
    result = run_scenario(
        RunOptions.of(
            scenario="tool-calls",
            target=ref_server.base_url,
            model=MODEL,
            api=api,
            duration_scale=0.25,  # 5 s at 5 req/s
            out=out,
            min_samples=10,
        )
    )
    summary = result.summary
    assert summary.requests.ok == summary.requests.sent >= 10, summary.requests
    r = summary.reasoning
    assert r is not None and r.tool_requests == r.tool_calls == summary.requests.ok, r
    assert r.thinking_requests == 0
    rows = pq.read_table(out / "samples.parquet").to_pylist()
    # The reference server's call fills max_tokens (64): every token an argument piece.
    assert all(
        row["tool_calls"] == 1
        and row["carried"] == TOOL
        and row["output_tokens"] == row["n_chunks"] == 64
        and row["t_first_answer"] == row["t_first_token"]
        for row in rows
    ), rows[0]
    assert "ttfa" in summary.metrics
    described = summary.environment["request_source"]
    assert described["tools"] == ["lookup", "weather"] and described["tool_choice"] == "lookup"


def test_the_offer_travels_to_a_worker_whole() -> None:
    source = fit_source(load_scenario("tool-calls"), seed=7, calibration=None)
    assert isinstance(source, OfferSource)
    again = source_from_wire(source_to_wire(source))
    assert again == source


def test_a_datasets_rows_offer_their_own_tools(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    """Rows carrying `tools` and `tool_choice` in either API's words (a BFCL-like dataset):
    each is sent with its own, and the reference model calls the one each names."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    openai_tool = {"type": "function", "function": {"name": "weather", "parameters": schema}}
    anthropic_tool = {"name": "lookup", "input_schema": schema}
    rows = [
        {"prompt": "rain?", "output_tokens": 20, "tools": [openai_tool], "tool_choice": "required"},
        {"prompt": "define", "output_tokens": 20, "tools": [anthropic_tool, openai_tool],
         "tool_choice": {"type": "tool", "name": "weather"}},
        {"prompt": "hello", "output_tokens": 20},
    ]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    run_scenario(
        RunOptions.of(
            scenario="smoke",
            target=ref_server.base_url,
            model=MODEL,
            dataset=str(path),
            out=out,
            min_samples=10,
            duration_scale=0.5,
            html=False,  # not read here (~3 s of CPU); the runs above render the page
        )
    )
    sent = pq.read_table(out / "samples.parquet").to_pylist()
    by_row = {r["source_row"]: (r["tool_calls"], r["carried"]) for r in sent if not r["error"]}
    assert by_row == {0: (1, TOOL), 1: (1, TOOL), 2: (0, TEXT)}, by_row
