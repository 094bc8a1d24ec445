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


def _admitted(sched: Scheduler, loop, profiles: list[str], prompt_tokens: int) -> list[Sequence]:  # type: ignore[no-untyped-def]
    seqs = []
    for p in profiles:
        s = Sequence("req_x", [tokenizer.BOS] * prompt_tokens, 2, (), SamplingParams(), p,
                     time.time(), time.perf_counter(), loop)  # fmt: skip
        assert sched.submit(s) is None
        seqs.append(s)
    return seqs


def test_a_prefill_budget_leaves_the_prompts_past_it_for_the_next_boundary() -> None:
    """Fixed steps: at most the budget's prompt tokens are prefilled at one boundary (the
    first prompt always), in arrival order; the rest wait, slot held, for the next one;
    low-latency prompts never wait."""
    loop = asyncio.new_event_loop()
    try:
        backend = RecordingSim()
        sched = Scheduler("zero-queue", max_slots=8, kv_budget_tokens=10_000)
        metrics = Metrics("zero-queue", "sim", "sim", "tiny")
        engine = Engine(backend, sched, metrics, loop, prefill_budget=20)
        profiles = ["high-throughput"] * 4 + ["low-latency"]
        seqs = _admitted(sched, loop, profiles, prompt_tokens=8)
        new, _, _ = sched.take_new()
        engine._prefill_all(new)
        # Low-latency first and alone; then 8 + 8 tokens fit 20, the third does not.
        assert backend.prefills == [[seqs[4].slot], [seqs[0].slot, seqs[1].slot]]
        assert engine.pending == [seqs[2], seqs[3]]
        engine._prefill_all([])
        assert backend.prefills[2] == [seqs[2].slot, seqs[3].slot]
        assert engine.pending == []
        # A prompt longer than the budget is prefilled alone, never held back forever.
        (big,) = _admitted(sched, loop, ["high-throughput"], prompt_tokens=30)
        new, _, _ = sched.take_new()
        engine._prefill_all(new)
        assert backend.prefills[3] == [big.slot] and engine.pending == []
    finally:
        loop.close()


def test_x_stream_mode_low_latency_is_honoured_and_said(zq_server: Server) -> None:
    """The design's header asks for the low-latency profile; the response says it was
    applied. Another value is a 400 naming the header."""
    body = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "p"}]}
    url = zq_server.url + "/v1/messages"
    r = httpx.post(url, json=body, headers={"x-stream-mode": "low-latency"})
    assert r.status_code == 200
    assert r.headers["x-stream-mode"] == "low-latency"
    assert r.headers["x-execution-profile"] == "low-latency"
    plain = httpx.post(url, json=body)
    assert "x-stream-mode" not in plain.headers
    assert plain.headers["x-execution-profile"] == "high-throughput"
    # An explicit execution profile wins; the stream mode was then not what was applied.
    both = httpx.post(
        url,
        json=body,
        headers={"x-stream-mode": "low-latency", "x-execution-profile": "long-context"},
    )
    assert both.headers["x-execution-profile"] == "long-context"
    assert "x-stream-mode" not in both.headers
    bad = httpx.post(url, json=body, headers={"x-stream-mode": "turbo"})
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "X-Stream-Mode must be low-latency (or absent)"
