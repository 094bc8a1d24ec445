"""The tool-calling workload (#42 item 4): scenarios/tool-calls.toml against the reference
server, whose model calls the tool it is named; every answer is one call, counted exactly,
and the source travels to a distributed worker with its offer."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL
from zqbench.dialects.base import TOOL
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
