"""The embedded reference server: starts, answers, pins CPUs when asked, stops by PID."""

from __future__ import annotations

import os

import pytest

from zqbench.target.embedded import EmbeddedServer, get_health


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux CPU affinity and at least 2 CPUs",
)
def test_pinning_gives_the_server_the_last_cpu_and_restores_ours() -> None:
    before = os.sched_getaffinity(0)
    with EmbeddedServer(engine="sim", pin_cpus=True) as server:
        assert server._proc is not None
        last = max(before)
        assert os.sched_getaffinity(server._proc.pid) == {last}
        assert os.sched_getaffinity(0) == before - {last}
        assert get_health(server.base_url)["engine"] == "sim"
        proc = server._proc
    assert os.sched_getaffinity(0) == before
    assert proc.poll() is not None, "stopped"
