"""Suite-wide: the longest files are collected first.

pytest-xdist (`--dist loadfile`) hands whole files to the workers in collection order. In
name order the vLLM file, about 4 minutes on its own, came last: one worker ran it while the
other sat idle. Started first, it runs beside everything else.
"""

from __future__ import annotations

import pytest

# The files that take a minute or more (the slowest of `pytest --durations`), longest first.
LONGEST_FIRST = (
    "tests/vllm/test_vllm.py",
    "tests/profile/test_gpu_check_dry_run.py",
    "tests/core/test_distributed.py",
    "tests/scenarios_e2e/test_mixed_length.py",
    "tests/scenarios_e2e/test_overload.py",
    "tests/impair/test_packet_loss_netns.py",
    "tests/profile/test_profile_runs.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order, the rest theirs
