"""The pieces alone: sim backend, scheduler admission, sequences, configuration."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from reference_server.backend import SamplingParams
from reference_server.cli import build_parser, config_from_args
from reference_server.config import ServerConfig
from reference_server.model import tokenizer
from reference_server.model.sim import SimBackend, SimCost
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence


def _seq(loop: asyncio.AbstractEventLoop, prompt_len: int = 4, max_tokens: int = 4,
         stop: tuple[str, ...] = (), profile: str = "high-throughput") -> Sequence:  # fmt: skip
    return Sequence("req_x", [tokenizer.BOS] * prompt_len, max_tokens, stop, SamplingParams(),
                    profile, time.time(), time.perf_counter(), loop)  # fmt: skip


def test_sim_is_deterministic_printable_and_takes_its_modelled_time() -> None:
    cost = SimCost(prefill_base_ms=2, prefill_per_token_ms=0, decode_base_ms=3, decode_per_seq_ms=1)
    a, b = SimBackend(2, 64, seed=1, cost=cost), SimBackend(2, 64, seed=1, cost=cost)
    p = [tokenizer.encode("same prompt")]
    fa, ta = a.prefill([0], p, [SamplingParams()])
    fb, _ = b.prefill([1], p, [SamplingParams()])
    assert fa == fb and ta.gpu_ms is None and ta.wall_ms >= 2
    na, td = a.decode([0], fa)
    assert na == b.decode([1], fb)[0] and td.wall_ms >= 4
    assert all(tokenizer.GENERATABLE_LOW <= t <= tokenizer.GENERATABLE_HIGH for t in fa + na)
    with pytest.raises(ValueError):
        SimCost(decode_base_ms=-1)


def test_zero_queue_reserves_under_concurrency() -> None:
    """Many threads racing for slots: exactly max_slots admissions, never more."""
    loop = asyncio.new_event_loop()
    try:
        sched = Scheduler("zero-queue", max_slots=3, kv_budget_tokens=10_000)
        seqs = [_seq(loop) for _ in range(64)]
        results: list[str | None] = []
        lock = threading.Lock()

        def admit(s: Sequence) -> None:
            r = sched.submit(s)
            with lock:
                results.append(r)

        threads = [threading.Thread(target=admit, args=(s,)) for s in seqs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert results.count(None) == 3 and results.count("no_slot") == 61
        admitted, _, _ = sched.take_new()
        assert sorted(s.slot for s in admitted) == [0, 1, 2]  # type: ignore[type-var]
        sched.release(admitted[0])
        assert sched.submit(_seq(loop)) is None
    finally:
        loop.close()


def test_kv_budget_and_fifo_order_and_timeout() -> None:
    loop = asyncio.new_event_loop()
    try:
        zq = Scheduler("zero-queue", max_slots=4, kv_budget_tokens=16)
        assert zq.submit(_seq(loop, 4, 4)) is None
        assert zq.submit(_seq(loop, 4, 8)) == "kv_budget"  # 8 + 12 > 16
        fifo = Scheduler("fifo", max_slots=1, kv_budget_tokens=100, queue_timeout_s=0.05)
        first, second, third = _seq(loop), _seq(loop), _seq(loop)
        fast = _seq(loop, profile="low-latency")
        for s in (first, second, third, fast):
            assert fifo.submit(s) is None
        # A free slot and nobody waiting: taken in the handler, as zero-queue does.
        assert first.slot is not None and first.dispatch is not None
        assert second.slot is None and fifo.num_waiting == 3
        assert fifo.take_new().new == [first]
        fifo.release(first)
        new, _, _ = fifo.take_new()
        assert new == [fast]  # low-latency requests go ahead of the queue
        fifo.release(fast)
        late = _seq(loop)
        assert fifo.submit(late) is None and late.slot is None  # a free slot, but two wait
        time.sleep(0.06)
        _, expired, _ = fifo.take_new()
        assert expired == [second, third, late]
    finally:
        loop.close()


def test_stop_sequences_are_held_back_until_decided() -> None:
    loop = asyncio.new_event_loop()
    try:
        s = _seq(loop, max_tokens=10, stop=("cd",))
        out = ""
        for ch in "abcd":
            done, kind, piece = s.append_token(ord(ch))
            assert kind == "text"
            out += piece
        assert done and out == "ab" and s.stop_reason == "stop_sequence" and s.output_tokens == 4
    finally:
        loop.close()


def test_config_validation_and_yaml(tmp_path: object) -> None:
    with pytest.raises(ValueError):
        ServerConfig(scheduler="lifo")
    with pytest.raises(ValueError):
        ServerConfig(queue_timeout_s=1.0)  # zero-queue has no queue
    with pytest.raises(ValueError):
        ServerConfig(gpu_memory_utilization=1.5)
    path = tmp_path / "config.yaml"  # type: ignore[operator]
    path.write_text(
        "model_path: small\ngpu_memory_utilization: 0.5\nmax_batch_size: 16\n"
        "max_concurrent_kernels: 2\ndispatch_latency_target_us: 800\nkv_cache_dtype: bfloat16\n"
        "sim: {decode_base_ms: 2.0}\n"
    )
    cfg = config_from_args(
        build_parser().parse_args(["--config", str(path), "--max-batch-size", "4"])
    )
    assert cfg.preset == "small" and cfg.max_batch_size == 4  # flags win over the file
    assert cfg.kv_budget_tokens == int(0.5 * 4 * 2048) and cfg.sim.decode_base_ms == 2.0
    path.write_text("bogus_key: 1\n")
    with pytest.raises(ValueError):
        config_from_args(build_parser().parse_args(["--config", str(path)]))
