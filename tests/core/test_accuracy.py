"""What zqbench reports, against a server whose every write time is known.

The programmed server (tests/servers) stamps `perf_counter_ns()` just before each write
and keys it by the `x-request-id` zqbench sends; both processes share CLOCK_MONOTONIC, so
each sample is compared with the truth of the very same request.
"""

from __future__ import annotations

import statistics
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import write_scenario
from tests.servers import ProgrammedServer
from zqbench.engines.live import Progress
from zqbench.run import RunOptions, run_scenario

OPEN_LOOP = """
name = "accuracy"
description = "programmed latency"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = {rate}
duration = "{duration}"
[request]
max_tokens = 8
stream = true
timeout = "20s"
prompt_tokens = 16
"""


@pytest.fixture
def server() -> Any:
    with ProgrammedServer() as srv:
        yield srv


def _samples_with_truth(out: Path, srv: ProgrammedServer) -> tuple[list[dict], dict, int]:
    table = pq.read_table(out / "samples.parquet")
    start = int(table.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    return table.to_pylist(), srv.all_truth()["truth"], start


def test_ttfb_ttft_and_latency_match_the_server_truth_at_200_rps(
    server: ProgrammedServer, tmp_path: Path
) -> None:
    """Head at 10 ms, tokens at 20, 25, ... 55 ms: medians within 1 ms of the truth."""
    scenario = write_scenario(tmp_path, OPEN_LOOP.format(rate=200, duration="3s"))
    result = run_scenario(
        RunOptions(
            scenario=str(scenario),
            target=server.url,
            model="m",
            headers=("x-program: /anthropic?n=8&every=5&first=20&head=10",),
            out=tmp_path / "run",
            calibration="off",  # no probe requests among the server's truth
        )
    )
    rows, truth, start = _samples_with_truth(result.out_dir, server)
    assert len(rows) == 600
    errors: dict[str, list[float]] = {"ttfb": [], "ttft": [], "latency": []}
    for r in rows:
        assert r["error"] is None, r
        t = truth[f"zq-{r['request_id']}"]
        # Client interval minus the server's interval for the same request, in ms.
        errors["ttfb"].append(((r["t_headers"] - r["t_send"]) - (t["t_head"] - t["t_recv"])) / 1e6)
        errors["ttft"].append(
            ((r["t_first_token"] - r["t_send"]) - (t["t_chunks"][1] - t["t_recv"])) / 1e6
        )
        errors["latency"].append(((r["t_end"] - r["t_send"]) - (t["t_end"] - t["t_recv"])) / 1e6)
        errors.setdefault("send", []).append((t["t_recv"] - (r["t_send"] + start)) / 1e6)
        errors.setdefault("head_delivery", []).append((r["t_headers"] + start - t["t_head"]) / 1e6)
        errors.setdefault("token_delivery", []).append(
            (r["t_first_token"] + start - t["t_chunks"][1]) / 1e6
        )
        # And the client never sees a byte before the server wrote it.
        assert r["t_first_token"] + start >= t["t_chunks"][1]
    medians = {name: round(statistics.median(v), 3) for name, v in errors.items()}
    for name in ("ttfb", "ttft", "latency"):
        # On failure the parts say where the time went: the send path or the delivery path.
        assert 0 <= medians[name] < 1.0, f"{name}: median error {medians[name]} ms; {medians}"
    summary = result.summary
    # The programmed truth itself: TTFT p50 is 20 ms plus the (sub-ms) error above.
    assert 0.020 <= summary.metrics["ttft"].p50 < 0.021
    assert 0.010 <= summary.metrics["ttfb"].p50 < 0.011


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
        RunOptions(
            scenario=str(scenario),
            target=server.url,
            model="m",
            headers=("x-program: /anthropic?n=2&every=5&first=5",),
            max_connections=4,
            warm_connections=4,
            out=tmp_path / "run",
            calibration="off",  # no probe requests among the server's truth
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
    # The generator could not send on time, so the run says it is not valid as a measurement.
    assert summary.verdict == "invalid"
    assert any("schedule" in reason for reason in summary.validity.reasons)
