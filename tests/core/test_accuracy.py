"""What zqbench reports, against a server whose every write time is known.

The programmed server (tests/servers) stamps `perf_counter_ns()` just before each write
and keys it by the `x-request-id` zqbench sends; both processes share CLOCK_MONOTONIC, so
each sample is compared with the truth of the very same request (tests/core/accuracy.py).

The bounds here are what a busy 2-core machine meets; the sub-millisecond figures of a
quiet machine are `benchmarks/accuracy.py`'s (docs/performance.md).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.core.accuracy import FIRST_TOKEN_MS, HEAD_MS, OPEN_LOOP, measure
from tests.core.conftest import write_scenario
from tests.servers import ProgrammedServer
from zqbench.engines.live import Progress
from zqbench.pipeline.run import RunOptions, run_scenario

pytestmark = pytest.mark.slow  # a programmed server and seconds of load per test

# Median error of TTFB, TTFT and latency against the server's truth. Quiet machine: 0.2-0.5
# ms (benchmarks/accuracy.py). Measured on this project's 2-core machine with a CPU hog and
# other test suites beside it (load average 11): up to 2.7 ms in 8 runs. The bound is the
# program's token spacing: a sample one token off (5 ms) fails it, a busy machine does not.
MAX_MEDIAN_ERROR_MS = 5.0
# summary.json's p50s also carry the server's own lateness past its programmed deadline
# (up to 5.4 ms in the same busy runs); 10 ms still tells TTFT (20 ms) from TTFB (10 ms)
# and from the end of the stream (55 ms).
MAX_P50_OVER_PROGRAM_MS = 10.0


@pytest.fixture
def server() -> Any:
    with ProgrammedServer() as srv:
        yield srv


def test_ttfb_ttft_and_latency_match_the_server_truth_at_200_rps(
    server: ProgrammedServer, tmp_path: Path
) -> None:
    """Head at 10 ms, tokens at 20, 25, ... 55 ms: every interval measured from the send
    matches the server's own, request by request, and no byte is seen before it was written."""
    a = measure(server, tmp_path, rate=200, duration_s=3)
    if max(a.medians_ms[name] for name in ("ttfb", "ttft", "latency")) >= MAX_MEDIAN_ERROR_MS:
        # Once, a second try: a CI runner with load far past its cores (a suite of 21 min
        # for 8) read every byte late, 5.7 ms at the median. An error of zqbench's own (a
        # token off) fails both tries; the machine's worst minute rarely lasts two.
        a = measure(server, tmp_path / "again", rate=200, duration_s=3)
    # On failure the figures say where the time went (send path or delivery path) and how
    # busy the machine was (the generator's own schedule_lag).
    seen = f"{a}"
    assert (a.requests, a.errors, a.early) == (600, 0, 0), seen
    for name in ("ttfb", "ttft", "latency"):
        assert 0 <= a.medians_ms[name] < MAX_MEDIAN_ERROR_MS, f"{name}: {seen}"
    assert FIRST_TOKEN_MS <= a.ttft_p50_ms < FIRST_TOKEN_MS + MAX_P50_OVER_PROGRAM_MS, seen
    assert HEAD_MS <= a.ttfb_p50_ms < HEAD_MS + MAX_P50_OVER_PROGRAM_MS, seen


def test_a_server_stall_shows_in_latency_corrected_not_only_in_latency(
    server: ProgrammedServer, tmp_path: Path
) -> None:
    """Coordinated omission: with 4 connections, a 2 s stall holds back the sends behind it.

    Measured from the send, those requests look fast; measured from their intended time
    (open loop), they carry the stall. Only the 4 requests on the wire see it in `latency`.
    """
    scenario = write_scenario(tmp_path, OPEN_LOOP.format(rate=50, duration="6s"))
    stall_now = threading.Event()

    def on_progress(progress: Progress) -> None:
        if progress.sent >= 100:  # about 2 s into the schedule
            stall_now.set()

    def staller() -> None:
        if stall_now.wait(timeout=30):
            server.stall(2000)

    thread = threading.Thread(target=staller, daemon=True)
    thread.start()
    result = run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=server.url,
            model="m",
            headers=("x-program: /anthropic?n=2&every=5&first=5",),
            max_connections=4,
            warm_connections=4,
            # About the stall's wait, not the generator's precision on a busy machine (its
            # own lag p99 reached 10.3 ms beside another test).
            max_schedule_lag_s=0.05,
            out=tmp_path / "run",
            calibration="off",  # no probe requests among the server's truth
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        ),
        on_progress=on_progress,
    )
    thread.join(timeout=5)
    rows = [r for r in pq.read_table(result.out_dir / "samples.parquet").to_pylist()]
    assert len(rows) == 300 and all(r["error"] is None for r in rows)
    latency = [(r["t_end"] - r["t_send"]) / 1e9 for r in rows]
    corrected = [(r["t_end"] - r["t_intended"]) / 1e9 for r in rows]
    assert max(corrected) >= 1.8
    assert sum(c > 1.0 for c in corrected) >= 40  # every request meant for the stall's first half
    assert sum(v > 1.0 for v in latency) <= 8  # only those already on the 4 connections
    summary = result.summary
    assert summary.metrics["latency_corrected"].p99 >= 1.5
    assert summary.metrics["latency"].p99 < summary.metrics["latency_corrected"].p99
    # The sends behind the stall waited for one of the 4 connections the stalled server held:
    # the target's lateness, not the generator's (docs/design.md, "Late sends"), so the run
    # stays valid and says how long they waited.
    assert summary.validity.ok, summary.validity.reasons
    wait = summary.connection_wait
    assert wait is not None and wait.peak_in_flight == 4 and wait.waited >= 40
    assert wait.max_s >= 1.5 and summary.metrics["schedule_lag"].p99 < wait.p99_s
