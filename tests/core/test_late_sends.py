"""A late send is the generator's or the target's (docs/design.md, "Late sends").

- The target holds every connection zqbench may open (a slow server, 4 connections): sends
  wait for one, the run keeps its SLO verdict (FAIL), and the wait is reported.
- The generator itself is starved of CPU (SIGSTOP for 0.6 s mid-run): INVALID, as always.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.core.conftest import REPO, run_programmed, write_scenario
from tests.servers import ProgrammedServer

pytestmark = pytest.mark.slow

HELD = """
name = "held"
api = "anthropic"
[slo]
checks = ["latency_corrected:p99<1s"]
[validity]
min_samples = 20
max_schedule_lag = "100ms"  # a busy machine's generator; the waits are seconds
[load]
executor = "constant-arrival-rate"
rate = 30
duration = "2s"
graceful_stop = "15s"
[request]
max_tokens = 4
prompt_tokens = 8
"""
# 230 ms a request: 4 connections serve 17 a second of the 30 offered.
SLOW = "x-program: /anthropic?n=4&every=10&first=200&head=200"


def test_a_target_holding_every_connection_keeps_the_slo_verdict_and_shows_the_wait(
    tmp_path: Path,
) -> None:
    result, _ = run_programmed(
        tmp_path, HELD, SLOW, max_connections=4, warm_connections=4, html=False
    )
    summary = result.summary
    assert summary.validity.ok, summary.validity.reasons  # not the generator's lateness
    assert summary.verdict == "fail" and result.exit_code == 1  # the SLO: the target's queue
    (slo,) = summary.slos
    assert slo.metric == "latency_corrected" and slo.verdict == "fail"
    lag, wait = summary.metrics["schedule_lag"], summary.metrics["connection_wait"]
    assert lag.p99 is not None and lag.p99 < 0.1
    assert wait.p99 is not None and wait.p99 > 0.5  # about 25 sends behind, 17 a second
    section = summary.connection_wait
    assert section is not None
    assert section.sent == summary.requests.sent == 60
    assert 20 <= section.waited < 60 and section.peak_in_flight == 4
    assert section.limit_s == 0.1 and section.max_s >= section.p99_s == wait.p99
    text = (result.out_dir / "summary.md").read_text()
    assert f"{section.waited:,} of 60 sends waited for a free connection" in text
    assert "--max-connections" in text


QUICK = """
name = "starved"
api = "anthropic"
[validity]
min_samples = 20
max_schedule_lag = "100ms"
[load]
executor = "constant-arrival-rate"
rate = 100
duration = "4s"
[request]
max_tokens = 2
prompt_tokens = 8
"""
FAST = "x-program: /anthropic?n=2&every=1&first=2&head=1"


def test_a_generator_starved_of_cpu_is_invalid(tmp_path: Path) -> None:
    """60 of 400 sends fall due while the process is stopped: schedule_lag p99 past 0.5 s,
    none of it a wait for a connection (1,024 free)."""
    scenario = write_scenario(tmp_path, QUICK)
    out = tmp_path / "run"
    with ProgrammedServer() as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zqbench", "run", str(scenario), "--target", server.url,
             "--model", "m", "-H", FAST, "--calibration", "off", "--quiet", "--out", str(out)],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while server.all_truth()["requests"] < 100:  # a second into the schedule
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            proc.send_signal(signal.SIGSTOP)
            time.sleep(0.6)
            proc.send_signal(signal.SIGCONT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 4, stderr
    assert "invalid: the generator fell behind its schedule: schedule_lag p99 = " in stdout
    assert "waited for a free connection" not in stdout


CUT = """
name = "cut"
api = "anthropic"
[outcomes]
at_rest_probes = 0  # each would wait 3 s too
[validity]
min_samples = 10
max_schedule_lag = "100ms"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "1s"
graceful_stop = "500ms"
[request]
max_tokens = 4
prompt_tokens = 8
"""
HUNG = "x-program: /anthropic?n=4&every=10&first=3000&head=3000"  # 3 s before any byte


def test_sends_still_waiting_for_a_connection_at_the_end_keep_their_rows(
    tmp_path: Path,
) -> None:
    """2 connections held for 3 s, 20 sends: 18 wait as records, not tasks, and the end of
    the run gives each its row (interrupted, never written, its wait), as a cut task would."""
    result, truth = run_programmed(tmp_path, CUT, HUNG, max_connections=2, html=False)
    rows = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    assert sorted(r["request_id"] for r in rows) == list(range(20))  # none lost
    reached = [k for k in truth["truth"] if k.startswith("zq-")]
    assert len(reached) == 2, reached  # only the two on a connection reached the target
    never = [r for r in rows if r["t_send"] == r["t_end"]]
    assert len(never) == 18
    for r in never:
        assert r["error"] == "interrupted" and r["status"] == 0
        # From its due time to the cut: 0.5 s of grace at least, 1.5 s at most.
        assert 0.5e9 <= r["connection_wait"] <= r["t_end"] - r["t_intended"] + 1e6, r
    outcomes = result.summary.outcomes
    assert outcomes is not None and outcomes.counts["interrupted"] == 20


def test_twenty_thousand_sends_waiting_at_the_end_each_keep_one_row(tmp_path: Path) -> None:
    """The waiting sends are four numbers each (engines.native.Waiting), and the end of the
    run records them a batch at a time: 19,998 of 20,000 planned never reach a connection,
    each has its row, and the two that were sent are the only ones the target saw."""
    many = CUT.replace("rate = 20\n", "rate = 10000\n").replace('"1s"', '"2s"')
    result, truth = run_programmed(tmp_path, many, HUNG, max_connections=2, html=False)
    table = pq.read_table(result.out_dir / "samples.parquet")
    ids = table.column("request_id").to_pylist()
    assert sorted(ids) == list(range(20_000))  # every planned request, once
    reached = [k for k in truth["truth"] if k.startswith("zq-")]
    assert len(reached) == 2, reached
    never = table.filter(pc.equal(table["t_send"], table["t_end"]))
    assert never.num_rows == 19_998
    assert set(never.column("error").to_pylist()) == {"interrupted"}
    waits = never.column("connection_wait").to_numpy()
    assert waits.min() >= 0.5e9  # each waited from its due time to the cut, grace included
    assert result.summary.requests.sent == 20_000


def test_over_http2_sends_past_100_streams_a_connection_wait_as_rows_without_a_deadline(
    tmp_path: Path,
) -> None:
    """HTTP/2 multiplexes, but not without end: past 100 streams a connection, sends wait as
    records, as HTTP/1.1's do, and their timeout starts when they go. Before, each was a task
    with its request built, waiting in the transport until its timeout (500,000 on a silent
    target peaked at 1,715 MiB, and ended as timeouts that were never sent)."""
    many = CUT.replace("rate = 20\n", "rate = 1000\n").replace('"1s"', '"2s"')
    many += 'timeout = "1s"\n'  # each round of 100 sent times out, and 100 more go
    result, truth = run_programmed(tmp_path, many, HUNG, max_connections=1, http2=True, html=False)
    table = pq.read_table(result.out_dir / "samples.parquet")
    assert sorted(table.column("request_id").to_pylist()) == list(range(2_000))
    reached = len([k for k in truth["truth"] if k.startswith("zq-")])
    sent = table.filter(pc.not_equal(table["t_send"], table["t_end"]))
    assert sent.num_rows == reached and 100 <= reached <= 400, (sent.num_rows, reached)
    never = table.filter(pc.equal(table["t_send"], table["t_end"]))
    assert never.num_rows == 2_000 - reached
    assert set(never.column("error").to_pylist()) == {"interrupted"}  # none a timeout
    assert set(table.column("http_version").to_pylist()) == {"2"}
