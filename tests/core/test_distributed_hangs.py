"""A worker never hangs and never says 0 for a run it lost (#25 item 16): a deadline for a
master to listen, SIGTERM heard at once, and exit 3 when its master ends the run early or
goes silent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.core.conftest import REPO, zqbench, zqbench_here
from tests.core.test_distributed import SECRET_ENV, _free_port, _wait_for_rows, next_file
from tests.core.test_distributed_trust import _master, _worker
from zqbench.distributed.worker import MASTER_SILENT_S
from zqbench.errors import EXIT_INTERRUPTED, EXIT_TARGET, EXIT_USAGE
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow


def _stop(*procs: subprocess.Popen[bytes]) -> None:
    """Each process still running, killed by its PID; all reaped."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_with_no_master_a_worker_gives_up_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    began = time.monotonic()
    result = zqbench(
        "worker", "--master", f"127.0.0.1:{port}", "--once", "--connect-timeout", "1",
        env=SECRET_ENV,
    )  # fmt: skip
    assert result.returncode == EXIT_TARGET
    assert result.stderr.strip().splitlines()[-1] == (
        f"zqbench: error: no zqbench master answered at 127.0.0.1:{port} within 1 s; start"
        " `zqbench run --distributed` there first, or raise --connect-timeout"
    )
    assert time.monotonic() - began < 30  # Locust alone retried for 300 s
    monkeypatch.setenv("ZQBENCH_SECRET", SECRET_ENV["ZQBENCH_SECRET"])
    bad = zqbench_here("worker", "--master", "127.0.0.1:1", "--connect-timeout", "-1")
    assert bad.returncode == EXIT_USAGE
    assert bad.stderr.strip() == (
        "zqbench: error: --connect-timeout -1: must be a finite number of seconds, 0 or more"
        " (0 waits as long as it takes)"
    )


def _wait_for_line(log: Path, line: str, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while line not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_sigterm_stops_a_worker_that_waits_for_its_master(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zqbench", "worker", "--master", f"127.0.0.1:{_free_port()}",
             "--connect-timeout", "0"],
            cwd=REPO, stdout=sink, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), **SECRET_ENV},
        )  # fmt: skip
    try:
        # Imported and waiting: it says so (a fixed 3 s sleep was too short on a loaded runner).
        _wait_for_line(log, "zqbench worker: waiting for a master at 127.0.0.1:", proc)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        assert proc.wait(timeout=10) == EXIT_INTERRUPTED, log.read_text()
        assert time.monotonic() - sent < 3
    finally:
        _stop(proc)


def test_a_worker_whose_master_ends_before_assigning_exits_3(
    tmp_path: Path, ref_server: EmbeddedServer
) -> None:
    port = _free_port()
    master = _master(tmp_path, ref_server, port, "3", expect="2")
    worker = _worker(tmp_path, port, "worker", SECRET_ENV)
    try:
        assert master.wait(timeout=60) == EXIT_TARGET  # 1 of 2 workers joined
        assert worker.wait(timeout=20) == EXIT_TARGET
    finally:
        _stop(master, worker)
    text = (tmp_path / "worker.log").read_text()
    assert f"zqbench worker: the master at 127.0.0.1:{port} ended the run early" in text


def test_a_worker_whose_master_dies_mid_load_stops_and_exits_3(
    tmp_path: Path, ref_server: EmbeddedServer
) -> None:
    port = _free_port()
    master = _master(tmp_path, ref_server, port, "60", duration="60s")
    worker = _worker(tmp_path, port, "worker", SECRET_ENV)
    try:
        own = next_file(tmp_path / "w" / "run")
        _wait_for_rows(own, 20)
        master.send_signal(signal.SIGKILL)
        master.wait(timeout=10)
        killed = time.monotonic()
        assert worker.wait(timeout=MASTER_SILENT_S + 20) == EXIT_TARGET
        assert time.monotonic() - killed < MASTER_SILENT_S + 15
    finally:
        _stop(master, worker)
    text = (tmp_path / "worker.log").read_text()
    assert (
        f"zqbench worker: the master at 127.0.0.1:{port} went silent during the load; it"
        f" stopped, and its samples are in {own} (no heartbeat for {MASTER_SILENT_S:g} s)"
    ) in text
