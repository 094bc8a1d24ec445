"""`--http2` against a server that speaks only HTTP/2 (h2c, prior knowledge): the
pre-checks speak it too, so the run works; without the flag, one line says to add it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.conftest import REPO, zqbench_here
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import free_port


@pytest.fixture(scope="module")
def h2c_only() -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "reference_server", "--engine", "sim", "--http", "2"]
    server = subprocess.Popen(
        [*cmd, "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def test_http2_reaches_resolves_calibrates_and_runs_on_an_h2c_only_server(
    h2c_only: str, tmp_path: Path
) -> None:
    result = run_scenario(
        RunOptions.of(
            scenario="smoke",
            target=h2c_only,
            http2=True,
            duration_scale=0.2,
            min_samples=10,
            out=tmp_path / "run",
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )
    assert result.summary.requests.sent == 20 and result.summary.requests.failed == 0
    resolution = result.summary.target_resolution
    assert resolution is not None and resolution.model_source == "discovered"
    assert result.summary.environment["prompts"]["calibration"] is not None  # probed over h2


def test_without_http2_the_error_says_to_add_it(h2c_only: str) -> None:
    result = zqbench_here("run", "smoke", "--target", h2c_only)
    assert result.returncode == 3
    address = h2c_only.removeprefix("http://")
    assert result.stderr.strip().splitlines() == [
        f"zqbench: error: cannot reach {address}: illegal request line (a server that speaks "
        "only HTTP/2? add --http2)"
    ]


def test_probe_with_http2_resolves_and_probes_an_h2c_only_server(h2c_only: str) -> None:
    # The probe's resolver asked GET /v1/models over HTTP/1.1 whatever --http2 said: exit 3,
    # "illegal request line", on a target that speaks only HTTP/2 (#44 item 5).
    result = zqbench_here("probe", "--target", h2c_only, "--http2", "-n", "3")
    assert result.returncode == 0, result.stderr
    assert f"probe {h2c_only}: 3 sequential requests, 3 ok" in result.stdout
