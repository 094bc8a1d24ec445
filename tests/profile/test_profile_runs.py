"""`zqbench profile` for real: torch on CPU end to end, nsys and ncu as fakes on PATH."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import httpx
import pandas as pd
import pytest

from zqbench.errors import TargetError
from zqbench.pipeline.run import RunOptions
from zqbench.profile.command import ProfileJob, profile
from zqbench.profile.torch_trace import load_events, request_ranges
from zqbench.profile.window import WindowSpec
from zqbench.saved.gate import gate_run
from zqbench.target.embedded import free_port

pytestmark = pytest.mark.slow

SMALL_TORCH = ("--device", "cpu", "--preset", "tiny", "--max-batch-size", "4")


def _options(scenario: Path, out: Path, **kw: object) -> RunOptions:
    return RunOptions.of(scenario=str(scenario), out=out, server_scheduler="fifo", **kw)  # type: ignore[arg-type]


# The tests that read no report.html render none: its figures cost about 3 s of CPU a run
# (test_torch_profile_of_the_pulse renders the page and checks its Profile section).
NO_PAGE = {"html": False}


def test_torch_profile_of_the_pulse(
    scenario_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance: a Chrome trace in the run folder whose request ranges carry the ids of
    samples.parquet, only for requests inside the pulse, and the Profile section. The
    server wants an API key: the profiling routes get it too."""
    pytest.importorskip("torch")
    monkeypatch.setenv("ZQ_PROFILE_KEY", "sekrit")
    out = tmp_path / "run"
    job = ProfileJob("torch", WindowSpec(stage="pulse"))
    server_args = (*SMALL_TORCH, "--api-key-env", "ZQ_PROFILE_KEY")
    options = _options(scenario_file, out, server_args=server_args, api_key_env="ZQ_PROFILE_KEY")
    result = profile(options, job)
    assert result is not None and result.out_dir == out
    prof = result.summary.profile
    assert prof is not None and prof.tool == "torch" and not prof.notes
    assert (prof.window_start, prof.window_end) == (1.5, 3.0)
    assert prof.started_at is not None and prof.stopped_at is not None
    traces = sorted((out / "profile" / "torch").glob("*.json"))
    assert len(traces) == 1 and str(traces[0].relative_to(out)) in prof.artifacts
    traced = request_ranges(load_events(traces[0])).requests
    assert prof.request_ranges == len(traced) > 0
    assert any(op.name == "aten::mm" for op in prof.top_ops)

    samples = pd.read_parquet(out / "samples.parquet").set_index("request_id")
    ids = {f"zq-{i}": i for i in samples.index}
    assert set(traced) <= set(ids)  # every range carries an id zqbench sent
    start, stop = prof.started_at, prof.stopped_at
    for rid in traced:  # admitted while the capture ran: sent before its end, ended after its start
        row = samples.loc[ids[rid]]
        assert row.t_send / 1e9 < stop + 1.0 and row.t_end / 1e9 >= start
    inside = samples[(samples.t_send / 1e9 >= start) & (samples.t_first_token / 1e9 <= stop)]
    assert len(inside) >= 5
    assert {f"zq-{i}" for i in inside.index} <= set(traced)  # none inside is missing
    before = samples[samples.t_end / 1e9 < start]
    assert len(before) >= 5 and not {f"zq-{i}" for i in before.index} & set(traced)

    # The slowest requests sent in the window: those whose first token came before the
    # capture stopped are in the trace. On a busy machine one sent near the window's end
    # waited 1.8 s for its first token, past the stop, and was rightly not in it.
    assert prof.slowest
    for r in prof.slowest:
        if samples.loc[ids[r.request_id]].t_first_token / 1e9 <= stop:
            assert r.in_trace, r
    assert prof.slowest[0].ttft == max(r.ttft for r in prof.slowest)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["profile"]["request_ranges"] == prof.request_ranges
    html = (out / "report.html").read_text()
    assert 'id="profile"' in html and f"<code>{prof.slowest[0].request_id}</code>" in html
    md = (out / "summary.md").read_text()
    assert "### Profile" in md and f"`request {prof.slowest[0].request_id}`" in md
    # A gate after the fact keeps the capture: the same summary, byte for byte.
    assert gate_run(out).to_json() == (out / "summary.json").read_text()


def test_nsys_profile_with_a_fake_nsys(
    scenario_file: Path, tmp_path: Path, fake_tools: Path
) -> None:
    """The server runs under `nsys profile`; its report and `nsys stats` CSVs are collected
    and tabled. The sim engine has no CUDA: the capture's refusal is a note, not a failure."""
    out = tmp_path / "run"
    job = ProfileJob("nsys", WindowSpec(start_s=1.0, end_s=2.0))
    result = profile(_options(scenario_file, out, server_engine="sim", **NO_PAGE), job)
    assert result is not None
    calls = [json.loads(line) for line in fake_tools.read_text().splitlines()]
    assert [c[:2] for c in calls] == [["nsys", "profile"], ["nsys", "stats"]]
    assert "--capture-range=cudaProfilerApi" in calls[0]
    assert f"--output={out / 'profile' / 'nsys'}" in calls[0]
    assert calls[1][-1] == str(out / "profile" / "nsys.nsys-rep")
    prof = result.summary.profile
    assert prof is not None
    assert "profile/nsys.nsys-rep" in prof.artifacts
    assert [(k.name, k.calls, k.total_ms) for k in prof.top_ops] == [
        ("ampere_sgemm_128x64_tn", 30, 3.0),
        ("flash_fwd_kernel", 10, 2.0),
    ]
    assert prof.ranges[0].name == "refserver:request zq-3"
    assert prof.started_at is None and prof.notes[0].startswith("POST /start_profile: ")
    assert all(r.in_trace is None for r in prof.slowest)
    md = (out / "summary.md").read_text()
    assert "`ampere_sgemm_128x64_tn`" in md and "`refserver:request zq-3`" in md


def test_ncu_profile_with_a_fake_ncu(scenario_file: Path, tmp_path: Path, fake_tools: Path) -> None:
    out = tmp_path / "run"
    job = ProfileJob("ncu", WindowSpec(stage="pulse"))
    result = profile(_options(scenario_file, out, server_engine="sim", **NO_PAGE), job)
    assert result is not None and result.summary.profile is not None
    calls = [json.loads(line) for line in fake_tools.read_text().splitlines()]
    assert len(calls) == 1 and calls[0][0] == "ncu" and "--launch-count=20" in calls[0]
    assert "profile/ncu.ncu-rep" in result.summary.profile.artifacts


def test_torch_profile_of_a_server_command(scenario_file: Path, tmp_path: Path) -> None:
    """`-- SERVER_COMMAND`: started verbatim with the trace folder in its environment,
    waited for at --target, stopped by PID afterwards."""
    pytest.importorskip("torch")
    port = free_port()
    command = (sys.executable, "-m", "reference_server", "--engine", "sim", "--port", str(port))
    out = tmp_path / "run"
    job = ProfileJob("torch", WindowSpec(start_s=1.5, end_s=3.0), server_command=command)
    target = f"http://127.0.0.1:{port}"
    options = RunOptions.of(scenario=str(scenario_file), out=out, target=target, **NO_PAGE)
    result = profile(options, job)
    assert result is not None and result.summary.profile is not None
    prof = result.summary.profile
    assert prof.request_ranges > 0 and not prof.notes
    assert any(a.startswith("profile/torch/") for a in prof.artifacts)
    assert "listening on" in (out / "server.log").read_text()
    with pytest.raises(httpx.TransportError):  # stopped with the run
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_a_server_command_whose_port_already_answers_is_refused_before_it_starts(
    scenario_file: Path, tmp_path: Path
) -> None:
    """Another server on --target's port would pass the readiness check for the command's,
    and the profile would be of a process the profiler never started."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        marker = tmp_path / "started"
        command = (sys.executable, "-c", f"open({str(marker)!r}, 'w')")
        job = ProfileJob("torch", WindowSpec(start_s=1.5, end_s=3.0), server_command=command)
        target = f"http://127.0.0.1:{port}"
        options = RunOptions.of(scenario=str(scenario_file), out=tmp_path / "run", target=target)
        with pytest.raises(TargetError) as err:
            profile(options, job)
    assert str(err.value) == (
        f"127.0.0.1:{port} already accepts connections before the server command started; "
        "stop what listens there, or choose another port"
    )
    assert not marker.exists()
