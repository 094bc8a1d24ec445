"""The prefix cache's index: chained block keys, the longest cached run, LRU eviction."""

from __future__ import annotations

import pytest

from reference_server.backend import SamplingParams
from reference_server.model.prefix_cache import PrefixCache, block_hashes
from reference_server.model.sim import SimBackend, SimCost
from reference_server.model.tokenizer import encode


def test_a_block_key_names_the_whole_prefix_before_it() -> None:
    """Equal blocks after different prefixes get different keys; a partial block none."""
    a = block_hashes([1, 2, 3, 4, 5, 6, 7], 2)
    b = block_hashes([9, 2, 3, 4, 5, 6], 2)
    assert len(a) == 3 and len(b) == 3  # 7 tokens: three full blocks, the seventh left out
    assert a[1] != b[1] and a[2] != b[2]  # blocks [3, 4] and [5, 6] match, their prefixes not
    assert block_hashes([1, 2, 3, 4, 8, 8], 2)[:2] == a[:2]


def test_lookup_finds_the_longest_cached_run_and_leaves_the_last_token_to_compute() -> None:
    cache = PrefixCache(capacity=8, block_size=4)
    prompt = list(range(12))  # three full blocks
    assert cache.lookup(prompt) == []
    assert [index for index, _ in cache.store(prompt)] == [2, 1, 0]  # tail first
    ids = cache.lookup(prompt)
    assert len(ids) == 2  # block 2 holds the last prompt token: it is computed again
    assert cache.lookup([*prompt, 99])[:2] == ids and len(cache.lookup([*prompt, 99])) == 3
    assert cache.lookup([0, 1, 2, 3, 7, 7, 7, 7, 7]) == ids[:1]  # shares block 0 only
    assert cache.lookup([5, 1, 2, 3, 4, 5, 6, 7, 8]) == []  # differs in the first block
    assert cache.store([*prompt, 1, 2]) == []  # nothing new: its fourth block is partial


def test_a_full_cache_evicts_the_least_recently_used_block_tail_first() -> None:
    cache = PrefixCache(capacity=3, block_size=2)
    a, b, c = [1, 1, 2, 2, 3], [5, 5, 6], [8, 8, 9]  # two full blocks, one, one
    cache.store(a)
    cache.store(b)
    (fill,) = cache.store(c)  # full: the least recently used block goes, a's tail
    assert len(cache) == 3 and fill[0] == 0
    assert len(cache.lookup(a)) == 1  # a's head survives, and is matched alone
    assert len(cache.lookup(b)) == 1
    cache.store([4, 4, 0])  # c is now the least recently used
    assert cache.lookup(c) == [] and len(cache.lookup(a)) == 1 and len(cache.lookup(b)) == 1


def test_a_prompt_longer_than_the_cache_keeps_its_first_blocks() -> None:
    cache = PrefixCache(capacity=2, block_size=1)
    fill = cache.store([7, 8, 9, 10])
    assert sorted(fill) == [(0, 1), (1, 0)]  # two distinct ids, the prefix's first blocks
    assert len(cache.lookup([7, 8, 9])) == 2


def test_clear_and_bad_sizes() -> None:
    cache = PrefixCache(capacity=2, block_size=2)
    cache.store([1, 2, 3, 4])
    cache.clear()
    assert len(cache) == 0 and cache.lookup([1, 2, 3, 4, 5]) == []
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        PrefixCache(capacity=0)
    with pytest.raises(ValueError, match="block size must be >= 1"):
        PrefixCache(capacity=1, block_size=0)


def test_the_sim_engine_models_the_same_cache() -> None:
    """The sim reports cached tokens as the torch engine does; without a cache, None."""
    free = SimCost(0.0, 0.0, 0.0, 0.0)
    sim = SimBackend(max_slots=2, max_seq_len=256, cost=free, prefix_cache_blocks=8)
    prompt = encode("a prompt of forty bytes, two full blocks")
    cached = []
    for _ in range(2):
        sim.prefill([0], [prompt], [SamplingParams()])
        cached.append(sim.cached_tokens(0))
        sim.release(0)
    assert cached == [0, 32]
    off = SimBackend(max_slots=1, max_seq_len=64, cost=free, prefix_cache_blocks=0)
    off.prefill([0], [prompt], [SamplingParams()])
    assert off.cached_tokens(0) is None
