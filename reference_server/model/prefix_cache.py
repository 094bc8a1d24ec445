"""The prefix cache's index: prompt blocks named by a hash of their whole prefix, LRU-evicted.

A prompt is cut into blocks of `block_size` tokens; only full blocks are cached. Block k's
key is a hash chained over blocks 0..k (as vLLM's block hashes are), so one key names the
whole prefix up to the end of block k: two prompts share block k's entry only when they
agree on every token before its end. The index maps each key to a block id in
0..capacity-1, a row of the block pool its owner keeps (the torch engine: the K and V of
every layer at those positions, `kv_blocks.KVBlockPool`). Full, it evicts the least
recently used block and reuses its id.

Pure Python, no torch: a backend without tensors can model a cache with the same index.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict

DEFAULT_BLOCK_SIZE = 16  # tokens a block, vLLM's default
# 16384 tokens: as many as the default slots hold (8 x 2048 positions). The tiny preset's
# blocks are 16 KiB each (fp32 on CPU), so 16 MiB; the small preset's 256 MiB.
DEFAULT_BLOCKS = 1024


def block_hashes(tokens: list[int], block_size: int) -> list[bytes]:
    """The chained key of each full block of `tokens`: key k = sha256(key k-1, block k)."""
    keys: list[bytes] = []
    parent = b""
    for end in range(block_size, len(tokens) + 1, block_size):
        block = array("q", tokens[end - block_size : end]).tobytes()
        parent = hashlib.sha256(parent + block).digest()
        keys.append(parent)
    return keys


class PrefixCache:
    """Which prefixes are cached, and where: block key -> block id, least recent first."""

    def __init__(self, capacity: int, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if capacity < 1:
            raise ValueError(f"prefix cache capacity must be >= 1 block, got {capacity}")
        if block_size < 1:
            raise ValueError(f"prefix cache block size must be >= 1 token, got {block_size}")
        self.capacity = capacity
        self.block_size = block_size
        self._blocks: OrderedDict[bytes, int] = OrderedDict()
        self._free = list(range(capacity - 1, -1, -1))  # popped from the end: ids 0, 1, ...

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, prompt: list[int]) -> list[int]:
        """Block ids of the longest run of `prompt`'s leading blocks in the cache, marked
        recently used. It leaves out the block holding the last prompt token: a prefill
        computes at least that token, so that its logits exist."""
        usable = (len(prompt) - 1) // self.block_size
        keys = block_hashes(prompt[: usable * self.block_size], self.block_size)
        hit = 0
        while hit < len(keys) and keys[hit] in self._blocks:
            hit += 1
        self._touch(keys[:hit])
        return [self._blocks[key] for key in keys[:hit]]

    def store(self, prompt: list[int]) -> list[tuple[int, int]]:
        """Enter `prompt`'s full blocks (at most `capacity`, from the first); return
        (block index, block id) for each one not cached before, whose K and V the caller
        then copies into the pool. Blocks already cached are marked recently used."""
        keys = block_hashes(prompt, self.block_size)[: self.capacity]
        keep = set(keys)
        fill: list[tuple[int, int]] = []
        # Tail first, so the prompt's first block ends up the most recently used and
        # eviction takes a cached prefix's tail before its head (vLLM frees in this order):
        # a prefix without its head is never matched again.
        for index in reversed(range(len(keys))):
            key = keys[index]
            if key in self._blocks:
                self._blocks.move_to_end(key)
                continue
            block_id = self._allocate(keep)
            self._blocks[key] = block_id
            fill.append((index, block_id))
        return fill

    def clear(self) -> None:
        self._blocks.clear()
        self._free = list(range(self.capacity - 1, -1, -1))

    def _touch(self, keys: list[bytes]) -> None:
        for key in reversed(keys):  # the head last: most recently used
            self._blocks.move_to_end(key)

    def _allocate(self, keep: set[bytes]) -> int:
        """A free block id, else the id of the least recently used block outside `keep`
        (the blocks being stored: evicting one of those would hand out its id twice)."""
        if self._free:
            return self._free.pop()
        victim = next(key for key in self._blocks if key not in keep)
        return self._blocks.pop(victim)
