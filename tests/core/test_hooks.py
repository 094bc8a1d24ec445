"""Hooks start at t = 0 with the stages' times, and are always stopped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.core.conftest import MODEL, write_scenario
from zqbench.errors import TargetError
from zqbench.hooks.contract import HookContext, HookResult
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer

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


@pytest.mark.slow
def test_hook_gets_t0_and_stage_times_and_feeds_the_summary(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    hook = Recorder()
    result = run_scenario(
        RunOptions.of(
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
            RunOptions.of(
                scenario=str(write_scenario(tmp_path, TWO_STAGES)),
                target=ref_server.base_url,
                model=MODEL,
                out=tmp_path / "run",
                hooks=(hook,),
            )
        )
    assert hook.stopped == 1


THREE_STAGES = TWO_STAGES.replace(
    '{ duration = "1s", target = 60 }]',
    '{ duration = "1s", target = 60 }, { duration = "1s", target = 60 }]',
)


class LossRecord:
    """Reports what PacketLossHook reports, without touching nftables: the analysis stage
    keys on the hook's record, so a run needs no root to show its packet-loss section."""

    name = "packet-loss"

    def start(self, ctx: HookContext) -> None:
        pass

    def stop(self) -> HookResult:
        window = {"applied_s": 1.002, "removed_s": 2.003}
        return HookResult(
            environment={
                "impairment": "packet-loss",
                "loss": 0.1,
                "stages": [1],
                "windows": [window],
                "dropped_packets": 7,
            }
        )


@pytest.mark.slow
def test_a_packet_loss_record_becomes_the_runs_analysis_and_section(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = run_scenario(
        RunOptions.of(
            scenario=str(write_scenario(tmp_path, THREE_STAGES)),
            target=ref_server.base_url,
            model=MODEL,
            out=out,
            hooks=(LossRecord(),),
        )
    )
    loss = result.summary.packet_loss
    assert loss is not None
    assert loss.impaired_stages == [1] and loss.baseline_stages == [0]
    assert [(w.applied_s, w.removed_s) for w in loss.windows] == [(1.002, 2.003)]
    assert loss.dropped_packets == 7
    by_stage = result.summary.status_mix.by_stage
    counts = [sum(by_stage[str(i)].counts.values()) for i in range(3)]
    assert [s.requests for s in loss.stages] == counts
    assert loss.baseline_p99_s is not None and loss.loss_p99_s is not None
    assert loss.recovery.after_s == 2.0
    assert "### Packet loss" in (out / "summary.md").read_text()
    assert '<section id="packet-loss">' in (out / "report.html").read_text()
    assert (out / "plots" / "packet_loss.png").read_bytes()[:4] == b"\x89PNG"
