"""`zqbench sweep`: ramp, bisection, the knee, and the exit code, on a tiny budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.conftest import write_scenario, zqbench
from zqbench.errors import OptionError
from zqbench.pipeline.run import RunOptions
from zqbench.pipeline.sweep import run_sweep, sweep_config
from zqbench.scenario import load_scenario

# The capacity is set by the sim engine's sleeps, not by this machine: 4 slots, 8 output
# tokens at 12 ms per decode step, about 100 ms a request, so about 40 req/s. A busy machine
# only lowers it. 10 req/s (a quarter of it) passes; the ramp (x8 per 2 s step) fails at 80
# req/s (twice the capacity: about half refused). The [validity] limits fit the 20 requests
# of a 10 req/s step and a generator sharing two cores with the server and other work.
SLOW_SIM = "sim:\n  prefill_base_ms: 1\n  decode_base_ms: 12\n  decode_per_seq_ms: 0\n"
TINY = """
name = "tiny-sweep"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "1s"
[request]
max_tokens = 8
prompt_tokens = 32
timeout = "10s"
[slo]
checks = ["errors:rate<0.25"]
[validity]
min_samples = 20
max_schedule_lag = "500ms"
min_achieved_ratio = 0.9
[sweep]
min_rate = 10
max_rate = 640
step_factor = 8
step_duration = "2s"
bisect_steps = 1
"""


@pytest.mark.slow
def test_sweep_finds_the_knee_between_a_pass_and_a_fail(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, TINY)
    config = tmp_path / "sim.yaml"
    config.write_text(SLOW_SIM)
    result = run_sweep(
        RunOptions.of(
            scenario=str(path),
            server_engine="sim",
            server_args=("--max-batch-size", "4", "--config", str(config)),
            out=tmp_path / "sweep",
            html=False,
            warm_connections=64,
        )
    )
    report = json.loads((result.out_dir / "sweep.json").read_text())
    assert report == result.report.model_dump(mode="json")
    steps = report["steps"]
    assert result.exit_code == 0
    assert steps[0]["rate"] == 10 and steps[0]["passed"], steps[0]
    ramp = [s for s in steps if s["phase"] == "ramp"]
    assert [s["rate"] for s in ramp] == [10, 80], steps
    assert all(s["passed"] for s in ramp[:-1]) and not ramp[-1]["passed"]
    bisect = [s for s in steps if s["phase"] == "bisect"]
    assert len(bisect) == 1
    assert bisect[0]["rate"] == (ramp[-2]["rate"] + ramp[-1]["rate"]) / 2
    knee = max(s["rate"] for s in steps if s["passed"])
    assert report["knee"] == {
        "rate": knee,
        "step": next(s["index"] for s in steps if s["rate"] == knee),
        "by": "slo",
    }
    assert all(s["stopped"] is None for s in steps)  # the scenario has no [stop] rules
    assert [s["rate"] for s in report["curve"]] == sorted(s["rate"] for s in steps)
    for s in steps:
        summary = json.loads((result.out_dir / s["out_dir"] / "summary.json").read_text())
        assert summary["verdict"] == s["verdict"]
        assert summary["load"]["offered_rate"] == s["rate"]
    assert f"**capacity at SLO: {knee:g} req/s (step " in (result.out_dir / "sweep.md").read_text()


@pytest.mark.slow
def test_a_sweep_with_stop_rules_ends_at_its_first_saturated_step_the_knee(
    tmp_path: Path,
) -> None:
    """The same sim server, FIFO: 80 req/s is twice its capacity, so a queue grows within
    the step; the rule ends it, the sweep ends there (no bisection), and that is the knee."""
    body = TINY.replace('step_duration = "2s"', 'step_duration = "5s"')
    path = write_scenario(tmp_path, body + '[stop.queue_growth]\nwindow = "2s"\n')
    config = tmp_path / "sim.yaml"
    config.write_text(SLOW_SIM)
    result = run_sweep(
        RunOptions.of(
            scenario=str(path),
            server_engine="sim",
            server_scheduler="fifo",
            server_args=("--max-batch-size", "4", "--config", str(config)),
            out=tmp_path / "sweep",
            html=False,
            warm_connections=64,
        )
    )
    steps = result.report.steps
    assert [(s.rate, s.phase) for s in steps] == [(10, "ramp"), (80, "ramp")], steps
    assert steps[0].stopped is None and steps[0].passed
    assert steps[1].stopped is not None and steps[1].stopped.startswith("a queue is growing: ")
    assert result.report.knee is not None
    assert result.report.knee.model_dump() == {"rate": 80.0, "step": 1, "by": "stop"}
    assert result.exit_code == 0
    step = json.loads((result.out_dir / steps[1].out_dir / "summary.json").read_text())
    assert step["stop"]["events"][0]["reason"] == steps[1].stopped
    assert step["stop"]["events"][0]["at"] < 5.0  # within the step
    md = (result.out_dir / "sweep.md").read_text()
    assert f"**saturated at 80 req/s (step 1, a [stop] rule: {steps[1].stopped})**" in md.replace(
        "\\", ""
    )


@pytest.mark.slow
def test_sweep_cli_exits_1_when_even_the_first_rate_fails(tmp_path: Path) -> None:
    """No server answers in 1 us: one step, no knee, exit 1."""
    path = write_scenario(tmp_path, TINY)
    res = zqbench(
        "sweep",
        str(path),
        "--server-engine",
        "sim",
        "--slo",
        "latency:p50<1us",
        "--no-html",
        "--out",
        str(tmp_path / "out"),
        timeout=60,
    )
    assert res.returncode == 1, res.stderr
    assert "no passing rate: at the lowest rate, " in res.stdout
    assert ", the SLOs fail" in res.stdout
    report = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert report["knee"] is None and len(report["steps"]) == 1
    assert report["steps"][0]["verdict"] == "fail"


def test_sweep_config_takes_the_scenarios_table_and_checks_the_overrides(tmp_path: Path) -> None:
    scenario = load_scenario(str(write_scenario(tmp_path, TINY)))
    config = sweep_config(scenario, {"max_rate": 800.0, "bisect_steps": None})
    assert (config.min_rate, config.max_rate, config.step_factor) == (10, 800, 8)
    assert config.bisect_steps == 1  # None keeps the scenario's value
    with pytest.raises(OptionError, match=r"^max_rate 5: must be at least 10$"):
        sweep_config(scenario, {"max_rate": 5.0})
    with pytest.raises(OptionError, match=r"^step_factor 1: must be greater than 1$"):
        sweep_config(scenario, {"step_factor": 1.0})
    with pytest.raises(OptionError, match=r"^step_duration_s 0: must be greater than 0$"):
        sweep_config(scenario, {"step_duration_s": 0.0})
