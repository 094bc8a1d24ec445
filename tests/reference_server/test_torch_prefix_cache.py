"""The torch engine's prefix cache: a shared prefix is copied, not computed, and changes
no output; the engine reports it on the sequence and in the counters."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs torch (extra: torch)")

from reference_server.backend import SamplingParams  # noqa: E402 (after the importorskip)
from reference_server.engine import Engine  # noqa: E402
from reference_server.metrics import Metrics  # noqa: E402
from reference_server.model.tokenizer import encode  # noqa: E402
from reference_server.model.torch_runner import TorchBackend  # noqa: E402
from reference_server.scheduler import Scheduler  # noqa: E402
from reference_server.sequence import Sequence  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow]  # the tiny model on CPU: about a second

GREEDY = SamplingParams()
BLOCK = 16
# 70 tokens shared (BOS + 69 bytes): four full blocks, 64 tokens, are cacheable.
SHARED = "You are a careful assistant. Answer in one line. Context: " + "0123456789a"
FIRST = encode(SHARED + "? what is the first question")
SECOND = encode(SHARED + "! and here is a second, longer one, of a different length")


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """One intra-op thread: beside another test worker on 2 cores, more threads oversubscribe
    the cores and a second of work takes tens."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def backend(blocks: int) -> TorchBackend:
    return TorchBackend(
        preset="tiny", max_slots=2, max_seq_len=256, seed=0, prefix_cache_blocks=blocks
    )


def generate(
    b: TorchBackend, slots: list[int], prompts: list[list[int]], n: int
) -> list[list[int]]:
    """Prefill the prompts as one batch, decode them together; n tokens each."""
    firsts, _ = b.prefill(slots, prompts, [GREEDY] * len(slots))
    out = [[t] for t in firsts]
    for _ in range(n - 1):
        nxt, _ = b.decode(slots, [o[-1] for o in out])
        for o, t in zip(out, nxt, strict=True):
            o.append(t)
    return out


@pytest.fixture
def computed() -> Iterator[tuple[TorchBackend, list[int]]]:
    """A cached backend and the tokens each model forward of it computed, per row."""
    b = backend(64)
    widths: list[int] = []
    hook = b.model.register_forward_pre_hook(lambda _m, args: widths.append(args[0].shape[1]))
    yield b, widths
    hook.remove()


def test_a_shared_prefix_is_copied_not_computed(
    computed: tuple[TorchBackend, list[int]],
) -> None:
    """The second prompt takes the shared full blocks from the cache, computes only the rest,
    and generates exactly what an uncached backend generates."""
    warm, widths = computed
    cold = backend(0)
    assert SECOND[:70] == FIRST[:70] and SECOND[70] != FIRST[70]
    expected = [generate(cold, [i], [p], 16)[0] for i, p in enumerate((FIRST, SECOND))]
    assert cold.cached_tokens(0) is None  # no cache: nothing looked up

    assert generate(warm, [0], [FIRST], 16) == [expected[0]]
    assert warm.cached_tokens(0) == 0 and widths[0] == len(FIRST)
    warm.release(0)
    widths.clear()
    assert generate(warm, [1], [SECOND], 16) == [expected[1]]
    assert warm.cached_tokens(1) == 70 // BLOCK * BLOCK == 64
    assert widths[0] == len(SECOND) - 64  # the prefill ran on the uncached tokens only
    warm.release(1)
    assert warm.cached_tokens(1) == 0

    # The same prompt again: every full block but the one holding its last token.
    assert generate(warm, [0], [SECOND], 8) == [expected[1][:8]]
    assert warm.cached_tokens(0) == (len(SECOND) - 1) // BLOCK * BLOCK


def test_a_batch_mixing_hits_and_misses_matches_an_uncached_batch() -> None:
    """A row whose cached prefix ends near the end of the cache, batched with a long cold
    row: pad positions past the cache are clamped, and both rows decode as without a cache."""
    long = encode("x" * 199)  # 200 tokens: 12 full blocks cacheable
    cold_row = encode("a cold prompt, " * 6)
    warm, cold = backend(64), backend(0)
    generate(warm, [0], [long], 1)
    warm.release(0)
    got = generate(warm, [0, 1], [long, cold_row], 24)
    assert (warm.cached_tokens(0), warm.cached_tokens(1)) == (192, 0)
    assert got == generate(cold, [0, 1], [long, cold_row], 24)


def test_the_cache_evicts_to_its_size_and_can_be_off() -> None:
    """Two blocks of room: a third prompt evicts the oldest; 0 blocks means no cache."""
    small = backend(2)
    a, b = encode("A" * 40), encode("B" * 40)  # 41 tokens: two full blocks each
    assert small.prefix_cache_block_size == BLOCK and small.prefix_cache_bytes() > 0
    cached = []
    for prompt in (a, a, b, a):
        generate(small, [0], [prompt], 1)
        cached.append(small.cached_tokens(0))
        small.release(0)
    assert cached == [0, 32, 0, 0]  # the second a was a hit; b evicted a
    off = backend(0)
    assert off.prefix_cache_block_size is None and off.prefix_cache_bytes() == 0
    with pytest.raises(ValueError, match="prefix_cache_blocks >= 0"):
        backend(-1)


def test_the_engine_reports_cached_tokens_and_counts_them() -> None:
    """Each sequence knows its cached tokens; the counters grow by the prompt tokens looked
    up and those the cache supplied."""
    loop = asyncio.new_event_loop()
    try:
        warm = backend(64)
        sched = Scheduler("zero-queue", max_slots=2, kv_budget_tokens=10_000)
        metrics = Metrics("zero-queue", "torch", "cpu", "tiny")
        engine = Engine(warm, sched, metrics, loop)

        def prefill(prompt: list[int]) -> Sequence:
            s = Sequence("req_x", prompt, 1, (), GREEDY, "high-throughput",
                         time.time(), time.perf_counter(), loop)  # fmt: skip
            assert sched.submit(s) is None
            new, _, _ = sched.take_new()
            engine._prefill_all(new)  # one token: it finishes and frees its slot
            return s

        def counter(name: str) -> float | None:
            return metrics.registry.get_sample_value(f"refserver_prefix_cache_{name}_total")

        assert (counter("queries"), counter("hits")) == (0.0, 0.0)
        assert prefill(FIRST).cached_tokens == 0
        assert prefill(SECOND).cached_tokens == 64
        assert counter("queries") == len(FIRST) + len(SECOND)
        assert counter("hits") == 64
    finally:
        loop.close()
