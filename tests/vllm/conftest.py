"""A real vLLM server (CPU build, tiny random model) for the whole test session.

Set up by tests/vllm/setup.sh (`.ci/run` runs it). Where it is missing, the tests skip with
the reason; under CI=true a missing target is a failure, never a skip: CI must prove
zqbench against a real third-party server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.process_group import need_engine
from tests.vllm.target import VllmServer, free_port, start_vllm, vllm_available

REPO = Path(__file__).resolve().parents[2]


# Per module: stopped once its file is done, not kept (vLLM: 1.6 GB) beside the other
# engine, both pinned to core 0, for the rest of the run.
@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    need_engine("vLLM", vllm_available())
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    server = start_vllm(free_port(), log)
    try:
        yield server
    finally:
        server.stop()


def zqbench_pinned(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, on core 1: vLLM has core 0 (serve.sh pins it there)."""
    return _pinned(["-m", "zqbench", *args], cwd=cwd, timeout=timeout)


def _pinned(
    argv: list[str], *, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    pin = ["taskset", "-c", "1"] if (os.cpu_count() or 1) > 1 else []
    return subprocess.run(
        [*pin, sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        check=False,
    )


# `zqbench run` without its last step, report.html: RunOptions from JSON, the run's exit code.
RUN = """
import json, sys
from pathlib import Path
from zqbench.pipeline.run import RunOptions, run_scenario
options = json.loads(sys.argv[1])
options["out"] = Path(options["out"])
sys.exit(run_scenario(RunOptions.of(html=False, **options)).exit_code)
"""


def run_pinned(**options: str | float) -> subprocess.CompletedProcess[str]:
    """A run as `zqbench run` makes it (RunOptions.of takes the flags' names, `out`
    required), in a process of its own on core 1 as zqbench_pinned's, without report.html.

    For the tests about what the engine serves, not the page (each file's CLI runs check
    that): the page's eight figures take about 3 s of CPU a run, on the core the client
    shares with the other workers, all on the serial real-engines worker. A process of its
    own, as the CLI's: runs made in the pytest worker itself, pinned to core 1, had the
    generator stalled 0.15-0.74 s in 5 of 10 (schedule_lag p99 past the tests' 250 ms in 3);
    the CLI runs beside them once in 7 (0.24 s)."""
    return _pinned(["-c", RUN, json.dumps(options)])
