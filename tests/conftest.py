"""Suite-wide: the longest files are collected first, and the real engines share a worker.

pytest-xdist (`--dist loadgroup`) hands whole groups to the workers in collection order; each
file is a group of its own (as `loadfile` would make it), but the vLLM and llama.cpp files
are one: both servers are pinned to core 0 and their clients to core 1, so side by side each
would measure the other's load. In name order the vLLM file, about 4 minutes on its own, came
last: one worker ran it while the others sat idle. Started first, it runs beside everything
else.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

# Bytecode is cached for this run and the processes it starts (each xdist worker inherits the
# environment from here). With PYTHONDONTWRITEBYTECODE set, as on this project's CI machine,
# nothing was: every CLI run, reference server and worker the tests start compiled each
# zqbench module it imports from source again, and each worker's assertion rewriting every
# test file (collecting took 16 CPU-s a worker, 12 with the cache; test_run_cli and
# test_recovery 122 CPU-s, 116). __pycache__ is in .gitignore.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Property tests draw the same cases every run: a suite that passes passes every time, and a
# case one finds is kept as a regular test (tests/dialects: an OpenAI stream of only
# `data: [DONE]` once failed a clean clone's run). No example database, so no run learns
# from the last one.
settings.register_profile("zqbench", derandomize=True, database=None)
settings.load_profile("zqbench")

# The files that take a minute or more (the slowest of `pytest --durations`), longest first.
LONGEST_FIRST = (
    "tests/vllm/test_vllm.py",
    "tests/vllm/test_vllm_admission.py",
    "tests/vllm/test_vllm_cap_advisor.py",
    "tests/llamacpp/test_llamacpp.py",
    "tests/vllm/test_vllm_tools.py",
    "tests/profile/test_gpu_check_dry_run.py",
    "tests/core/test_distributed.py",
    "tests/scenarios_e2e/test_mixed_length.py",
    "tests/scenarios_e2e/test_overload.py",
    "tests/impair/test_packet_loss_netns.py",
    "tests/profile/test_profile_runs.py",
)

# A slow test runs a server under load and judges it by the clock, on 2 cores shared with two
# other workers. Each of the last three CI runs failed 4 to 7 of them, never the same one
# twice: a descheduled second turns a baseline P99 into 1.2 s, or a generator's lag into 72 ms.
# Each such test may run once more (pytest-rerunfailures); a real regression fails both runs,
# and the summary line counts the reruns ("N rerun"), so a test that needs its second run
# often is seen in every CI log. Fast tests get no second run.
SLOW_RERUNS = 1

# The third-party servers under test, one after the other on one worker.
REAL_ENGINES = (
    "tests/vllm/test_vllm.py",
    "tests/vllm/test_vllm_admission.py",
    "tests/vllm/test_vllm_cap_advisor.py",
    "tests/llamacpp/test_llamacpp.py",
    "tests/vllm/test_vllm_tools.py",
)


def _path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = _path(item)
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order, the rest theirs
    for item in items:
        group = "real-engines" if _path(item) in REAL_ENGINES else _path(item)
        item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.flaky(reruns=SLOW_RERUNS))


@pytest.fixture
def attempt_seed(request: pytest.FixtureRequest) -> int:
    """A run seed of this test's own, new on each attempt. A rerun (SLOW_RERUNS) against a
    server that outlives the test (a module's vLLM, a session's reference server) must not
    send the first attempt's prompts again: the server's prefix cache holds them now (a
    rerun of vLLM's cold-prompt test found 93% of them cached)."""
    attempt = getattr(request.node, "execution_count", 1)
    return zlib.crc32(request.node.nodeid.encode()) % 1_000_000 * 10 + attempt


@pytest.fixture(scope="session")
def _made_per_attempt() -> dict[tuple[str, int], Any]:
    return {}


PerAttempt = Callable[[str, Callable[[], Any]], Any]


@pytest.fixture
def per_attempt(
    request: pytest.FixtureRequest, _made_per_attempt: dict[tuple[str, int], Any]
) -> PerAttempt:
    """`per_attempt(key, make)`: `make()`'s result (a run, a conform report) shared by every
    test that asks for `key`, and made again for a rerun. A module-scoped run is made once,
    so a rerun of a test that judges it (SLOW_RERUNS) judged the same starved run again: in
    CI both of test_overload's judgements of one zero-queue run failed twice (time_to_reject
    p99 290 ms on a core three workers' servers shared). A rerun's run is shared by the
    other tests' reruns; a first attempt keeps the first run."""
    attempt = getattr(request.node, "execution_count", 1)

    def get(key: str, make: Callable[[], Any]) -> Any:
        made = _made_per_attempt
        if (key, attempt) not in made:
            made[(key, attempt)] = make()
        return made[(key, attempt)]

    return get
