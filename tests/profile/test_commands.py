"""Command construction, windows, trace and CSV parsing, and the failure paths (no server)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zqbench.errors import OptionError, UsageError
from zqbench.load.spans import StageInfo
from zqbench.profile import nsys_stats, tools, torch_trace
from zqbench.profile.window import WindowSpec

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, path: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "zqbench", "profile", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_nsys_command_captures_the_profiler_api_window_with_nvtx() -> None:
    cmd = tools.nsys_command("/x/nsys", Path("/run/profile/nsys"), ["srv", "--port", "1"])
    assert cmd[:2] == ["/x/nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in cmd
    assert "--trace=cuda,nvtx,osrt" in cmd
    assert "--output=/run/profile/nsys" in cmd
    assert cmd[-3:] == ["srv", "--port", "1"]


def test_ncu_command_filters_request_ranges_and_bounds_launches() -> None:
    limits = tools.NcuLimits(launch_skip=5, launch_count=7, section_set="detailed")
    cmd = tools.ncu_command("ncu", Path("/r/ncu"), ["srv"], limits)
    for arg in (
        "--profile-from-start=off",
        "--nvtx",
        "--nvtx-include=regex:refserver@request .*",
        "--launch-skip=5",
        "--launch-count=7",
        "--set=detailed",
        "--export=/r/ncu",
    ):
        assert arg in cmd
    assert cmd[-1] == "srv"
    assert "--set=full" in tools.ncu_command("ncu", Path("r"), [], tools.NcuLimits())


def test_missing_profiler_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(UsageError) as err:
        tools.find_tool("ncu")
    assert err.value.message.startswith("ncu not found on PATH; install NVIDIA Nsight Compute")


def test_window_spec() -> None:
    stages = [StageInfo("baseline", 0.0, 30.0), StageInfo("pulse", 30.0, 35.0)]
    assert WindowSpec.parse("pulse", None).resolve(stages) == (30.0, 35.0)
    assert WindowSpec.parse(None, "2.5:4").resolve(stages) == (2.5, 4.0)
    assert WindowSpec.parse(None, None).resolve(stages) == (0.0, 35.0)  # the whole run
    for stage, window in (("pulse", "1:2"), (None, "4:2"), (None, "x"), (None, "3")):
        with pytest.raises(OptionError):
            WindowSpec.parse(stage, window)
    with pytest.raises(OptionError, match="its stages: baseline, pulse"):
        WindowSpec.parse("spike", None).resolve(stages)


def test_torch_trace_self_times_and_request_ranges() -> None:
    """Self time: a parent's duration less its children's; request ranges overlap freely
    and never count as ops."""
    events = [
        {"ph": "X", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 100.0, "dur": 50.0},
        {"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 110.0, "dur": 30.0},
        {"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 200.0, "dur": 10.0},
        {"ph": "X", "name": "request zq-1", "pid": 1, "tid": 1, "ts": 90.0, "dur": 200.0},
        {"ph": "X", "name": "request zq-2", "pid": 1, "tid": 1, "ts": 105.0, "dur": 300.0},
        {"ph": "X", "name": "PyTorch Profiler (0)", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e4},
    ]
    ops = {op.name: op for op in torch_trace.top_ops(events)}
    assert set(ops) == {"aten::mm", "aten::linear"}
    assert (ops["aten::mm"].calls, ops["aten::mm"].total_ms) == (2, 0.04)
    assert (ops["aten::linear"].calls, ops["aten::linear"].total_ms) == (1, 0.02)
    ranges = torch_trace.request_ranges(events)
    assert ranges.requests == {"zq-1": 90.0, "zq-2": 105.0}


def test_nsys_stats_csv(tmp_path: Path) -> None:
    base = tmp_path / "nsys_stats"
    nsys_stats.report_csv(base, "cuda_gpu_kern_sum").write_text(
        '"Time (%)","Total Time (ns)","Instances","Name"\n'
        '10,1000000,4,"small"\n90,9000000,2,"big"\n'
    )
    rows = nsys_stats.read_summary(nsys_stats.report_csv(base, "cuda_gpu_kern_sum"))
    assert [(r.name, r.calls, r.total_ms) for r in rows] == [("big", 2, 9.0), ("small", 4, 1.0)]
    assert nsys_stats.read_summary(nsys_stats.report_csv(base, "nvtx_sum")) == []


def test_cli_without_profiler_exits_2_with_one_line(tmp_path: Path) -> None:
    """Acceptance: without nsys on PATH, `zqbench profile nsys` exits 2 with the remedy."""
    done = _cli("nsys", "--capture-stage", "pulse", path=str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "zqbench: error: nsys not found on PATH; install NVIDIA Nsight Systems (the CUDA "
        "toolkit's nsys, or https://developer.nvidia.com/nsight-systems) and put nsys on "
        "PATH, or use `zqbench profile torch`"
    )
    assert not (tmp_path / "reports").exists()  # nothing started, nothing written


def test_cli_dry_run_prints_the_nsys_command(fake_tools: Path, tmp_path: Path) -> None:
    """Acceptance: with nsys on PATH, --dry-run prints the capture-range command, runs nothing."""
    done = _cli(
        "nsys",
        "burst",
        "--dry-run",
        "--capture-stage",
        "pulse",
        "--out",
        str(tmp_path / "run"),
        path=os.environ["PATH"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    nsys = str(tmp_path / "bin" / "nsys")
    assert first.startswith(f"{nsys} profile --trace=cuda,nvtx,osrt --sample=none ")
    assert "--capture-range=cudaProfilerApi" in first
    assert first.endswith(
        "python -m reference_server --host 127.0.0.1 --port '<port>' --engine torch "
        "--scheduler zero-queue"
    )
    assert "stage pulse" in done.stdout
    assert f"{nsys} stats --report=cuda_gpu_kern_sum,nvtx_sum --format=csv" in done.stdout
    assert not fake_tools.exists() and not (tmp_path / "run").exists()


def test_cli_dry_run_with_a_server_command(fake_tools: Path, tmp_path: Path) -> None:
    done = _cli(
        "ncu",
        "--dry-run",
        "--capture-window",
        "1:2",
        "--target",
        "http://127.0.0.1:9",
        "--launch-count",
        "3",
        "--",
        "vllm",
        "serve",
        "m",
        "--port",
        "9",
        path=os.environ["PATH"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "--launch-count=3" in first and "--set=full" in first
    assert first.endswith(" vllm serve m --port 9")


def test_the_scenario_is_a_positional_and_a_server_command_never_is(
    fake_tools: Path, tmp_path: Path
) -> None:
    """`profile TOOL SCENARIO`, as `run SCENARIO`; what follows `--` is the server's."""
    smoke = _cli("torch", "smoke", "--dry-run", "--capture-stage", "pulse", path="", cwd=tmp_path)
    assert smoke.returncode == 2
    assert "its stages: stage 0" in smoke.stderr  # smoke's stages, not burst's
    after = _cli(
        "nsys", "--dry-run", "--capture-stage", "pulse", "--target", "http://127.0.0.1:9",
        "--", "smoke", "--port", "9", path=os.environ["PATH"], cwd=tmp_path,
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[0].endswith(" smoke --port 9")
    assert "stage pulse" in after.stdout  # the default scenario, burst


def test_profile_nsys_burst_dry_run_prints_the_capture_commands(tmp_path: Path) -> None:
    """#20's line: `zqbench profile nsys burst --dry-run`, no window given: the whole run is
    captured, and the commands print even where nsys is not installed (nothing runs)."""
    done = _cli("nsys", "burst", "--dry-run", path="", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("nsys profile --trace=cuda,nvtx,osrt ")
    assert "# capture: POST /start_profile and /stop_profile at the edges of the whole run" in lines
    assert any(line.startswith("nsys stats --report=cuda_gpu_kern_sum") for line in lines)
    assert not (tmp_path / "reports").exists()


def test_cli_server_command_needs_a_target(tmp_path: Path) -> None:
    done = _cli("torch", "--capture-window", "1:2", "--", "srv", path="", cwd=tmp_path)
    assert done.returncode == 2
    assert "needs --target URL" in done.stderr


def test_cli_unknown_stage(tmp_path: Path) -> None:
    done = _cli("torch", "--dry-run", "--capture-stage", "spike", path="", cwd=tmp_path)
    assert done.returncode == 2
    assert "its stages: baseline, pulse, recovery" in done.stderr
