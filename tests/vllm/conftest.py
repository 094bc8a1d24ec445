"""A real vLLM server (CPU build, tiny random model) for the whole test session.

Set up by tests/vllm/setup.sh (`.ci/run` runs it). Where it is missing, the tests skip with
the reason; under CI=true a missing target is a failure, never a skip: CI must prove
zqbench against a real third-party server.
"""

from __future__ import annotations

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
    pin = ["taskset", "-c", "1"] if (os.cpu_count() or 1) > 1 else []
    return subprocess.run(
        [*pin, sys.executable, "-m", "zqbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        check=False,
    )
