"""Hooks start at t = 0 with the stages' times, and are always stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.core.conftest import MODEL, write_scenario
from zqbench.embedded import EmbeddedServer
from zqbench.errors import TargetError
from zqbench.hooks import HookContext, HookResult
from zqbench.run import RunOptions, run_scenario

TWO_STAGES = """
name = "hooks"
description = "two stages"
api = "anthropic"
[load]
executor = "ramping-arrival-rate"
start_rate = 60
stages = [{ duration = "1s", target = 60 }, { duration = "1s", target = 60 }]
[request]
max_tokens = 4
prompt_tokens = 16
"""


class Recorder:
    name = "recorder"

    def __init__(self, fail_on_start: bool = False) -> None:
        self.fail_on_start = fail_on_start
        self.ctx: HookContext | None = None
        self.started_at = 0
        self.stopped = 0

    def start(self, ctx: HookContext) -> None:
        self.ctx = ctx
        self.started_at = time.perf_counter_ns()
        if self.fail_on_start:
            raise TargetError("cannot apply the impairment")

    def stop(self) -> HookResult:
        self.stopped += 1
        return HookResult(telemetry={"gpu_density": 0.5}, environment={"seen": True})


def test_hook_gets_t0_and_stage_times_and_feeds_the_summary(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    hook = Recorder()
    result = run_scenario(
        RunOptions(
            scenario=str(write_scenario(tmp_path, TWO_STAGES)),
            target=ref_server.base_url,
            model=MODEL,
            out=tmp_path / "run",
            hooks=(hook,),
        )
    )
    assert hook.stopped == 1
    assert hook.ctx is not None
    assert hook.ctx.start_monotonic_ns == result.summary.clock.start_monotonic_ns
    assert hook.started_at <= hook.ctx.start_monotonic_ns  # started before t = 0
    assert [(s.start_s, s.end_s) for s in hook.ctx.stages] == [(0.0, 1.0), (1.0, 2.0)]
    assert hook.ctx.port == int(ref_server.base_url.rsplit(":", 1)[1])
    assert result.summary.environment["recorder"] == {"seen": True}
    assert result.summary.telemetry["gpu_density"] == 0.5


def test_a_hook_that_fails_to_start_is_still_stopped(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    hook = Recorder(fail_on_start=True)
    with pytest.raises(TargetError, match="cannot apply the impairment"):
        run_scenario(
            RunOptions(
                scenario=str(write_scenario(tmp_path, TWO_STAGES)),
                target=ref_server.base_url,
                model=MODEL,
                out=tmp_path / "run",
                hooks=(hook,),
            )
        )
    assert hook.stopped == 1
