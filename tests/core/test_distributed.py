"""`zqbench run --distributed` with `zqbench worker`s, as local processes on loopback (#14).

The same scenario and seed as the native engine give exactly the same requests; both
workers' samples arrive; summary.json lists both with their clock offsets. A worker killed
with SIGKILL loses at most its unsent batch and the run names the missing slice; a late
worker is refused; Ctrl-C on the master stops the workers and keeps the partial results.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from tests.core.conftest import REPO, write_scenario, zqbench, zqbench_here
from zqbench.errors import (
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_SLO_FAILED,
    EXIT_TARGET,
    EXIT_USAGE,
)
from zqbench.saved.gate import gate_run
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow

SCENARIO = """
name = "dist"
api = "anthropic"
[validity]
# Four processes share this machine's cores with the server: what is tested is that the
# requests are the same, not the generator's lag on a busy machine.
max_schedule_lag = "2s"
min_samples = 10
[load]
executor = "constant-arrival-rate"
rate = 40
duration = "{duration}"
arrivals = "poisson"
[request]
max_tokens = 8
prompt_tokens = 16
timeout = "10s"
"""


# The master and its workers share it (zqbench.distributed.auth); the tests' own.
SECRET_ENV = {"ZQBENCH_SECRET": "test-secret-0123456789abcdef"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:  # the child holds its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "zqbench", *args],
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), **SECRET_ENV},
        )


@contextmanager
def _cluster(
    tmp_path: Path, server: EmbeddedServer, *, duration: str, workers: int, extra: tuple = ()
) -> Iterator[tuple[subprocess.Popen[bytes], list[subprocess.Popen[bytes]], Path]]:
    """A master expecting 2 workers, and `workers` workers; everything stopped by PID."""
    port = _free_port()
    scenario = write_scenario(tmp_path, SCENARIO.format(duration=duration))
    out = tmp_path / "run"
    master = _start(
        "run", str(scenario), "--target", server.base_url, "--calibration", "off",
        "--seed", "7", "--out", str(out), "-q", "--distributed", "--expect-workers", "2",
        "--master-bind", f"127.0.0.1:{port}", "--worker-wait", "60", *extra,
        log=tmp_path / "master.log",
    )  # fmt: skip
    procs = [
        _start(
            "worker",
            "--master",
            f"127.0.0.1:{port}",
            "--out",
            str(tmp_path / "w"),
            "--once",
            log=tmp_path / f"worker{i}.log",
        )
        for i in range(workers)
    ]
    try:
        yield master, procs, out
    finally:
        for proc in [master, *procs]:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _log(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text(errors="replace")


@pytest.fixture
def roomy_server() -> Iterator[EmbeddedServer]:
    """A sim server of its own with 64 slots: the two runs compared must see no refusal,
    and the worker's shared 16-slot one refused 2 of 115 in a full run (its slots still
    held by earlier tests' streams on a busy machine)."""
    with EmbeddedServer(engine="sim", max_batch_size=64) as server:
        yield server


def test_two_workers_send_what_the_native_engine_sends(
    tmp_path: Path, roomy_server: EmbeddedServer
) -> None:
    ref_server = roomy_server
    with _cluster(tmp_path, ref_server, duration="3s", workers=3) as (master, workers, out):
        assert master.wait(timeout=120) == 0, _log(tmp_path, "master")
        codes = sorted(w.wait(timeout=30) for w in workers)
    # Three workers for two places: one was refused, and said so.
    assert codes == [0, 0, EXIT_TARGET]
    logs = [_log(tmp_path, f"worker{i}") for i in range(3)]
    assert sum("refused by" in log and "already has its 2 workers" in log for log in logs) == 1

    native_scenario = write_scenario(tmp_path, SCENARIO.format(duration="3s"), "native")
    native = zqbench(
        "run", str(native_scenario), "--target", ref_server.base_url, "--calibration", "off",
        "--seed", "7", "--out", str(tmp_path / "native"), "-q",
    )  # fmt: skip
    assert native.returncode == 0, native.stderr
    dist, local = _summary(out), _summary(tmp_path / "native")
    assert dist["load"]["offered_requests"] == local["load"]["offered_requests"]
    assert dist["requests"] == local["requests"]
    assert dist["status_codes"] == local["status_codes"]

    samples = pq.read_table(out / "samples.parquet").to_pandas()
    native_samples = pq.read_table(tmp_path / "native" / "samples.parquet").to_pandas()
    assert sorted(samples["request_id"]) == sorted(native_samples["request_id"])
    assert set(samples["worker"]) == {0, 1}

    section = dist["distributed"]
    assert [w["index"] for w in section["workers"]] == [0, 1]
    for w in section["workers"]:
        assert w["state"] == "done"
        assert w["requests_sent"] == w["samples_received"] == w["requests_assigned"] > 0
        # One machine, one monotonic clock: the true offset is 0, within the uncertainty.
        assert w["clock_uncertainty_ns"] is not None and w["clock_offset_ns"] is not None
        assert abs(w["clock_offset_ns"]) <= w["clock_uncertainty_ns"] + 1_000
        assert w["clock_uncertainty_ns"] < 50_000_000
    assert section["lost_requests"] == 0
    # summary.md's Workers table: one row per worker, both done, nothing missing.
    md = (out / "summary.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith(("| 0 (", "| 1 ("))]
    assert len(rows) == 2 and all(row.endswith("| done |  |") for row in rows), md


def _wait_for_rows(path: Path, rows: int, timeout: float = 60) -> None:
    """Until the worker's own Arrow file holds `rows` samples (the run is under way)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and _rows(path)[0] >= rows:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} never reached {rows} samples")


def _rows(path: Path) -> tuple[int, int, set[int]]:
    """(rows, rows of the last batch, request ids) of an Arrow stream, even a cut one."""
    total, last, ids = 0, 0, set()
    with path.open("rb") as f:
        try:
            reader = ipc.open_stream(f)
        except pa.ArrowInvalid:  # not even its schema written yet
            return 0, 0, set()
        while True:
            try:
                batch = reader.read_next_batch()
            except (StopIteration, OSError, pa.ArrowInvalid):
                break
            if batch.num_rows:
                total, last = total + batch.num_rows, batch.num_rows
                ids.update(batch.column("request_id").to_pylist())
    return total, last, ids


@pytest.mark.parametrize(("allowed", "code"), [("0", EXIT_INVALID), ("0.95", EXIT_SLO_FAILED)])
def test_a_killed_worker_loses_at_most_its_unsent_batch(
    tmp_path: Path, ref_server: EmbeddedServer, allowed: str, code: int
) -> None:
    extra = ("--max-lost-share", allowed)
    with _cluster(tmp_path, ref_server, duration="8s", workers=2, extra=extra) as (
        master, workers, out,
    ):  # fmt: skip
        # Which process got share 1 is the master's choice: find it by its file.
        own = tmp_path / "w" / "run"
        deadline = time.monotonic() + 60
        while len(list(own.glob("samples.w*.arrows"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        _wait_for_rows(own / "samples.w1.arrows", 20)
        victim = next(
            w for i, w in enumerate(workers) if "share 1 " in _log(tmp_path, f"worker{i}")
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        assert master.wait(timeout=120) == code, _log(tmp_path, "master")

    _, last_batch, local_ids = _rows(own / "samples.w1.arrows")
    samples = pq.read_table(out / "samples.parquet").to_pandas()
    received = set(samples.loc[samples["worker"] == 1, "request_id"])
    assert received <= local_ids
    assert len(local_ids) - len(received) <= last_batch  # at most its unsent batch
    dist = _summary(out)
    lost = dist["distributed"]["workers"][1]
    assert lost["state"] == "lost" and lost["samples_received"] == len(received)
    assert lost["lost_requests"] == lost["requests_assigned"] - len(received) > 0
    assert lost["missing"].startswith(f"{lost['lost_requests']} of its")
    assert dist["distributed"]["workers"][0]["state"] == "done"
    if code == EXIT_INVALID:
        assert dist["verdict"] == "invalid"
        assert any(
            "lost with its workers" in r and "worker 1" in r for r in dist["validity"]["reasons"]
        )
    else:
        assert dist["verdict"] == "fail" and dist["validity"]["ok"]
    # A gate after the fact judges the lost worker again: the same summary, byte for byte.
    assert gate_run(out).to_json() == (out / "summary.json").read_text()


def test_ctrl_c_on_the_master_stops_the_workers_and_keeps_the_samples(
    tmp_path: Path, ref_server: EmbeddedServer
) -> None:
    with _cluster(tmp_path, ref_server, duration="30s", workers=2) as (master, workers, out):
        _wait_for_rows(next_file(tmp_path / "w" / "run"), 20)
        master.send_signal(signal.SIGINT)
        assert master.wait(timeout=60) == EXIT_INTERRUPTED, _log(tmp_path, "master")
        assert [w.wait(timeout=30) for w in workers] == [0, 0]
    dist = _summary(out)
    assert [w["state"] for w in dist["distributed"]["workers"]] == ["stopped", "stopped"]
    samples = pq.read_table(out / "samples.parquet").to_pandas()
    assert set(samples["worker"]) == {0, 1}
    assert 20 <= len(samples) < dist["load"]["offered_requests"]


def next_file(folder: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(folder.glob("samples.w*.arrows"))
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no worker file in {folder}")


def test_too_few_workers_is_one_line_and_exit_3(tmp_path: Path, ref_server: EmbeddedServer) -> None:
    scenario = write_scenario(tmp_path, SCENARIO.format(duration="1s"))
    port = _free_port()
    result = zqbench(
        "run", str(scenario), "--target", ref_server.base_url, "--calibration", "off",
        "--out", str(tmp_path / "run"), "-q", "--distributed", "--expect-workers", "2",
        "--master-bind", f"127.0.0.1:{port}", "--worker-wait", "1", env=SECRET_ENV,
    )  # fmt: skip
    assert result.returncode == EXIT_TARGET
    assert result.stderr.strip().splitlines()[-1] == (
        f"zqbench: error: 0 of 2 workers joined the master at 127.0.0.1:{port} within 1 s;"
        f" start `zqbench worker --master HOST:{port}` on each load machine, or lower"
        " --expect-workers"
    )
    assert not (tmp_path / "run").exists()  # nothing was written


def test_retry_after_follow_ups_are_refused_for_a_distributed_run(
    tmp_path: Path, ref_server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = SCENARIO.format(duration="1s") + "[outcomes]\nretry_after_follow_ups = 5\n"
    scenario = write_scenario(tmp_path, body)
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    result = zqbench_here(  # refused before any traffic: the CLI in this process
        "run", str(scenario), "--target", ref_server.base_url, "--calibration", "off",
        "--out", str(tmp_path / "run"), "-q", "--distributed", "--expect-workers", "1",
        "--master-bind", f"127.0.0.1:{_free_port()}", "--worker-wait", "1",
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip().splitlines()[-1] == (
        "zqbench: error: [outcomes] retry_after_follow_ups runs on this machine's workers "
        "only: remove it for a --distributed run"
    )
    assert not (tmp_path / "run").exists()  # nothing was written


def test_stop_rules_are_refused_for_a_distributed_run(
    tmp_path: Path, ref_server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = SCENARIO.format(duration="1s") + "[stop.error_rate]\nabove = 0.5\n"
    scenario = write_scenario(tmp_path, body)
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    result = zqbench_here(  # refused before any traffic: the CLI in this process
        "run", str(scenario), "--target", ref_server.base_url, "--calibration", "off",
        "--out", str(tmp_path / "run"), "-q", "--distributed", "--expect-workers", "1",
        "--master-bind", f"127.0.0.1:{_free_port()}", "--worker-wait", "1",
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip().splitlines()[-1] == (
        "zqbench: error: [stop] rules watch this machine's workers only: remove the [stop] "
        "table for a --distributed run"
    )
    assert not (tmp_path / "run").exists()  # nothing was written
