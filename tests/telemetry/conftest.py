"""A real reference server (sim engine) on loopback, and a helper to run zqbench with hooks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zqbench.hooks.contract import RunHook
from zqbench.pipeline.run import RunOptions, RunResult, run_scenario
from zqbench.target.embedded import EmbeddedServer

MODEL = "zq-reference"

TWO_SECONDS = """
name = "telemetry"
description = "2 s at 20 req/s"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "2s"
[request]
max_tokens = 8
prompt_tokens = 16
"""


@pytest.fixture(scope="module")
def ref_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    log = tmp_path_factory.mktemp("refserver") / "server.log"
    with EmbeddedServer(engine="sim", scheduler="zero-queue", log_path=log) as server:
        yield server


def run_with(hooks: list[RunHook], server: EmbeddedServer, tmp_path: Path) -> RunResult:
    scenario = tmp_path / "telemetry.toml"
    scenario.write_text(TWO_SECONDS)
    return run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=server.base_url,
            model=MODEL,
            out=tmp_path / "run",
            hooks=tuple(hooks),
        )
    )
