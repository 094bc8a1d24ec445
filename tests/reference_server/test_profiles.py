"""execution_profile changes scheduling: prefill grouping and order, and fifo priority."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from reference_server.backend import SamplingParams, StepTiming
from reference_server.engine import Engine
from reference_server.metrics import Metrics
from reference_server.model import tokenizer
from reference_server.model.sim import SimBackend
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence
from tests.reference_server.conftest import MODEL, Server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)


class RecordingSim(SimBackend):
    """The sim backend, recording which slots each prefill step took."""

    def __init__(self) -> None:
        super().__init__(max_slots=8, max_seq_len=64)
        self.prefills: list[list[int]] = []

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        self.prefills.append(list(slots))
        return super().prefill(slots, prompts, params)


def test_engine_prefill_groups_follow_the_profiles() -> None:
    """Arrivals of one step boundary: low-latency ones are prefilled alone and first,
    high-throughput ones together, long-context ones alone and last."""
    loop = asyncio.new_event_loop()
    try:
        backend = RecordingSim()
        sched = Scheduler("zero-queue", max_slots=8, kv_budget_tokens=10_000)
        engine = Engine(backend, sched, Metrics("zero-queue", "sim", "sim", "tiny"), loop)
        profiles = ["long-context", "high-throughput", "low-latency", "high-throughput",
                    "low-latency", "long-context"]  # fmt: skip
        seqs = []
        for p in profiles:
            s = Sequence("req_x", [tokenizer.BOS] * 4, 2, (), SamplingParams(), p,
                         time.time(), time.perf_counter(), loop)  # fmt: skip
            assert sched.submit(s) is None
            seqs.append(s)
        new, _, _ = sched.take_new()
        engine._prefill_all(new)
        slot = {id(s): s.slot for s in seqs}
        by_profile = [[profiles[i] for i, s in enumerate(seqs) if slot[id(s)] in g]
                      for g in backend.prefills]  # fmt: skip
        assert by_profile == [["low-latency"], ["low-latency"],
                              ["high-throughput", "high-throughput"],
                              ["long-context"], ["long-context"]]  # fmt: skip
    finally:
        loop.close()


def test_profile_is_echoed_and_counted(zq_server: Server) -> None:
    """Each response says which profile the server applied (x-execution-profile), from the
    body or the header; /metrics counts prefills per profile."""
    url = zq_server.url
    for profile in ("low-latency", "high-throughput", "long-context"):
        body = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "p"}]}
        r = httpx.post(url + "/v1/messages", json={**body, "execution_profile": profile})
        assert r.status_code == 200 and r.headers["x-execution-profile"] == profile
        r = httpx.post(url + "/v1/chat/completions", json=body,
                       headers={"x-execution-profile": profile})  # fmt: skip
        assert r.status_code == 200 and r.headers["x-execution-profile"] == profile
    metrics = httpx.get(url + "/metrics").text
    for profile in ("low-latency", "high-throughput", "long-context"):
        m = re.search(
            rf'^refserver_prefill_group_size_count{{profile="{profile}"}} (\S+)$', metrics, re.M
        )
        assert m is not None and float(m.group(1)) >= 2
    # Alone-prefilled profiles never share a prefill step.
    for profile in ("low-latency", "long-context"):
        m = re.search(
            rf'^refserver_prefill_group_size_bucket{{le="1.0",profile="{profile}"}} (\S+)$',
            metrics,
            re.M,
        )
        c = re.search(
            rf'^refserver_prefill_group_size_count{{profile="{profile}"}} (\S+)$', metrics, re.M
        )
        assert m is not None and c is not None and m.group(1) == c.group(1)
