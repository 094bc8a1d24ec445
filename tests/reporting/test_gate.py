"""`zqbench gate RUN_DIR`: SLOs re-evaluated on a saved run, exit codes per DESIGN.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.reporting.conftest import uniform_run
from tests.reporting.synth import write_synthetic_run
from zqbench.cli import app
from zqbench.errors import UsageError
from zqbench.saved.gate import gate_run
from zqbench.saved.run import load_run

runner = CliRunner()


@pytest.fixture(scope="module")
def uniform(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """p50 = 19.995 ms and p99 = 29.795 ms exactly (nearest rank of 4000 uniform values)."""
    return uniform_run(tmp_path_factory.mktemp("gate") / "uniform", slos=["latency:p99<100ms"])


def test_gate_with_the_runs_own_slos_reproduces_summary_json(uniform: Path) -> None:
    """Same samples, same RunInfo, same SLOs: the saved summary, number for number."""
    saved = json.loads((uniform / "summary.json").read_text())
    regated = json.loads(gate_run(uniform).to_json())
    assert regated["slos"] == saved["slos"]
    assert regated["metrics"] == saved["metrics"]
    assert regated["validity"] == saved["validity"]


EXAMPLES = sorted((Path(__file__).parents[2] / "reports" / "examples").glob("*/samples.parquet"))


@pytest.mark.parametrize("run", [p.parent for p in EXAMPLES], ids=lambda p: p.name)
def test_gate_reproduces_each_example_byte_for_byte(run: Path) -> None:
    """Everything summarize reads besides the samples is in summary.json (stage classes
    too): re-gating a committed example rewrites its summary.json unchanged."""
    assert gate_run(run).to_json() == (run / "summary.json").read_text()


def test_gate_known_answers(uniform: Path) -> None:
    summary = gate_run(uniform, ["latency:p50<21ms", "latency:p99<29ms", "latency:p99<29.8ms"])
    values = [(s.verdict, round(s.value * 1e3, 3)) for s in summary.slos]
    assert values == [("pass", 19.995), ("fail", 29.795), ("inconclusive", 29.795)]
    assert summary.verdict == "fail"


@pytest.mark.parametrize(
    ("slo", "code"),
    [("latency:p99<50ms", 0), ("latency:p99<25ms", 1), ("latency:p99<29.8ms", 1)],
)
def test_gate_cli_exit_codes(uniform: Path, slo: str, code: int) -> None:
    result = runner.invoke(app, ["gate", str(uniform), "--slo", slo])
    assert result.exit_code == code, result.output
    assert slo in result.output


def test_gate_inconclusive_ok_exits_0(uniform: Path) -> None:
    result = runner.invoke(
        app, ["gate", str(uniform), "--slo", "latency:p99<29.8ms", "--inconclusive-ok"]
    )
    assert result.exit_code == 0


def test_gate_invalid_run_exits_4(tmp_path: Path) -> None:
    """50 requests are too few for a valid run (min_samples = 100)."""
    write_synthetic_run(tmp_path / "small", n=50)
    result = runner.invoke(app, ["gate", str(tmp_path / "small"), "--slo", "latency:p99<1s"])
    assert result.exit_code == 4
    assert "only 50 requests" in result.output


@pytest.mark.slow
def test_gate_writes_nothing_unless_asked(tmp_path: Path) -> None:
    run = uniform_run(tmp_path / "run", slos=["latency:p99<100ms"])
    before = (run / "summary.json").read_bytes()
    assert runner.invoke(app, ["gate", str(run), "--slo", "latency:p99<25ms"]).exit_code == 1
    assert (run / "summary.json").read_bytes() == before
    assert (
        runner.invoke(app, ["gate", str(run), "--slo", "latency:p99<25ms", "--write"]).exit_code
        == 1
    )
    rewritten = json.loads((run / "summary.json").read_text())
    assert [s["expr"] for s in rewritten["slos"]] == ["latency:p99<25ms"]
    assert 'data-expr="latency:p99&lt;25ms"' in (run / "report.html").read_text()


def test_not_a_run_is_usage_error_naming_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope: not a run folder \(no such directory\)"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"empty: not a run folder \(no summary.json\)"):
        load_run(tmp_path / "empty")
    (tmp_path / "empty" / "summary.json").write_text('{"schema": "other/9"}')
    with pytest.raises(UsageError, match="schema 'other/9'"):
        load_run(tmp_path / "empty")


@pytest.mark.parametrize("command", ["gate", "report"])
def test_cli_not_a_run_exits_2_with_one_line(tmp_path: Path, command: str) -> None:
    result = runner.invoke(app, [command, str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "no summary.json" in result.output


def test_bad_slo_exits_2(uniform: Path) -> None:
    result = runner.invoke(app, ["gate", str(uniform), "--slo", "latency<5"])
    assert result.exit_code == 2


def test_gate_refuses_samples_with_a_repeated_request_id(uniform: Path, tmp_path: Path) -> None:
    """#25 item 18: rows of two runs in one samples.parquet are not one run to judge."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "doubled"
    shutil.copytree(uniform, run)
    table = pq.read_table(run / "samples.parquet")
    pq.write_table(pa.concat_tables([table, table.slice(0, 3)]), run / "samples.parquet")
    result = runner.invoke(app, ["gate", str(run), "--slo", "latency:p99<50ms"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"zqbench: error: {run}: request id 0 is in the samples more than once (3 repeated "
        "rows): not one run's samples"
    ]
