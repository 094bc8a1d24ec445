"""`zqbench report` on a run killed before its summary.json: recovered from the samples on
disk, summarised, marked interrupted, every output written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL, REPO, write_scenario, zqbench, zqbench_here
from tests.core.test_recorder import _sample
from tests.core.test_run_outputs import SHORT
from zqbench.samples import writer as recorder
from zqbench.target.embedded import EmbeddedServer

OUTPUTS = ("summary.json", "summary.md", "junit.xml", "report.html", "samples.parquet")


def _stream_rows(out: Path) -> int:
    return sum(recorder.read_stream(p).num_rows for p in out.glob(recorder.STREAM_GLOB))


@pytest.mark.slow
def test_a_run_killed_with_sigkill_is_recovered_by_report(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    scenario = write_scenario(tmp_path, SHORT.format(rate=20, duration="60s"))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zqbench", "run", str(scenario), "--target", ref_server.base_url,
         "--model", MODEL, "--out", str(out), "--quiet"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _stream_rows(out) < 20:
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert not (out / "summary.json").exists()
    kept = _stream_rows(out)
    assert kept >= 20

    res = zqbench("report", str(out))
    assert res.returncode == 0, res.stderr
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    assert not list(out.glob(recorder.STREAM_GLOB)) and not (out / "run-start.json").exists()
    assert pq.read_table(out / "samples.parquet").num_rows == kept
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["sent"] == kept
    assert summary["environment"]["interrupted"] is True
    assert summary["environment"]["recovered"] == {"samples": kept, "unknown": []}
    assert summary["verdict"] == "invalid"
    assert summary["validity"]["reasons"][0] == (
        f"interrupted: the run was stopped before it finished; {kept} samples were recovered "
        "from its sample streams by `zqbench report`"
    )
    assert summary["scenario"]["name"] == "short", "run-start.json said what the run was"
    assert summary["target"] == ref_server.base_url
    assert summary["clock"]["start_epoch_ns"] > 0
    assert 0 < summary["duration"] < 60
    assert "INVALID" in (out / "summary.md").read_text()
    # run-start.json kept how outcomes are judged: the recovered run judges them too.
    outcomes = summary["outcomes"]
    assert sum(outcomes["counts"].values()) == kept
    assert outcomes["basis"]["capacity"] == {
        "value": 16,
        "source": "stated",
        "detail": "/health `slots`",
    }
    assert "probes" in outcomes["basis"]["at_rest"]
    columns = pq.read_schema(out / "samples.parquet").names
    assert {"outcome", "false_refusal"} <= set(columns)
    again = zqbench("report", str(out))
    assert again.returncode == 0, "a recovered run is a saved run like any other"


_RULES = {"server_queue": 0.005, "margin": 0.02, "at_rest_probes": 1}
_AT_REST = {
    "probes": [{"size": 8, "prompt_tokens": 16, "ttft": 0.006}],
    "base": 0.006,
    "slope": 0.0,
    "spread": 0.0,
}


def _record(slos: list[object] | None = None, **run: object) -> str:
    """A run-start.json whose run has RunInfo's required fields, and `run`'s."""
    required = {"scenario": "s", "target": "http://t", "api": "anthropic", "started_at": "x",
                "start_monotonic_ns": 0, "start_epoch_ns": 0, "duration_s": 0.0}  # fmt: skip
    return json.dumps({"schema": "zqbench.run-start/1", "slos": slos or [], "run": required | run})


@pytest.mark.slow
@pytest.mark.parametrize(
    "record",
    [
        None,
        '{"schema": "zqbench.run-start/1", "slos": [], "run": "x"}',  # once exit 5 (#44)
        '{"schema": "zqbench.run-start/1", "slos": 5, "run": {}}',
        '{"schema": "zqbench.run-start/1", "slos": [], "run": {"scenario": [], "stages": 1}}',
        "[1, 2]",
        # Readable as RunInfo's types, damaged within: each was once exit 5 or a line that
        # named no file (#44 item 5).
        _record(target_resolution={"model": 5}),
        _record(target_resolution={}),
        _record(slos=["nope<1"]),
        _record(slos=[1]),
        _record(outcome_basis={"rules": _RULES, "at_rest": _AT_REST | {"probes": []}}),
    ],
)
def test_streams_without_a_start_record_are_recovered_as_unknown(
    tmp_path: Path, record: str | None
) -> None:
    """A folder with only a worker's stream, or one whose run-start.json is damaged: what
    the run was is unknown, and said so."""
    out = tmp_path / "run"
    out.mkdir()
    if record is not None:
        (out / "run-start.json").write_text(record)
    rec = recorder.SampleRecorder(recorder.stream_path(out, 0))
    for i in range(7):
        rec.add(_sample(i))
    rec.close()
    # The CLI in this process (the test above runs `zqbench report` as a user does): ten
    # cases, each 1-2 s less of a new interpreter importing zqbench.
    res = zqbench_here("report", str(out))
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["sent"] == 7
    assert summary["scenario"]["name"] == "unknown"
    assert summary["environment"]["recovered"] == {
        "samples": 7,
        "unknown": ["scenario", "target", "clock", "schedule", "SLOs"],
    }
    assert summary["validity"]["reasons"][0].endswith(
        "(scenario, target, clock, schedule, SLOs not known: run-start.json "
        + ("is missing)" if record is None else "is unreadable)")
    )
