"""`KVBlockPool`: the prefix cache's storage, the K and V of cached blocks, all layers.

Block id i (from `prefix_cache.PrefixCache`) is row i of two preallocated tensors, so the
memory a cache takes is fixed at startup: 2 x n_layers x n_blocks x n_kv_heads x block_size
x head_dim elements of the KV cache dtype. Blocks move by copy between the pool and a
slot's static KV cache: `load` before a prefill (the cached prefix into positions
0..n*block_size), `save` after it (a new block out of the slot). Copies stay on the
model's device, so the same code serves CPU and CUDA.
"""

from __future__ import annotations

import torch

from reference_server.model.transformer import KVCache, Transformer


class KVBlockPool:
    def __init__(self, model: Transformer, n_blocks: int, block_size: int) -> None:
        caches = [layer.attention.kv_cache for layer in model.blocks()]
        if any(c is None for c in caches):
            raise ValueError("call Transformer.setup_caches before building a KVBlockPool")
        self._caches: list[KVCache] = [c for c in caches if c is not None]
        first = self._caches[0].k_cache  # [n_slots, Hkv, max_seq_len, D]
        _, n_kv_heads, _, head_dim = first.shape
        self.block_size = block_size
        shape = (len(self._caches), n_blocks, n_kv_heads, block_size, head_dim)
        self.k = torch.zeros(shape, dtype=first.dtype, device=first.device)  # [L, N, Hkv, B, D]
        self.v = torch.zeros(shape, dtype=first.dtype, device=first.device)

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    def load(self, slot: int, block_ids: list[int]) -> None:
        """Copy the blocks, in order, into `slot`'s cache at positions 0..len(block_ids)*B."""
        if not block_ids:
            return
        ids = torch.tensor(block_ids, dtype=torch.long, device=self.k.device)
        n = len(block_ids) * self.block_size
        for layer, cache in enumerate(self._caches):
            for pool, target in ((self.k, cache.k_cache), (self.v, cache.v_cache)):
                blocks = pool[layer, ids].transpose(0, 1)  # [Hkv, n_blocks, B, D]
                target[slot, :, :n] = blocks.reshape(blocks.shape[0], n, blocks.shape[-1])

    def save(self, slot: int, blocks: list[tuple[int, int]]) -> None:
        """Copy `slot`'s positions index*B..(index+1)*B into block id, for each (index, id)."""
        if not blocks:
            return
        dev = self.k.device
        index = torch.tensor([i for i, _ in blocks], dtype=torch.long, device=dev)
        ids = torch.tensor([b for _, b in blocks], dtype=torch.long, device=dev)
        n = (max(i for i, _ in blocks) + 1) * self.block_size
        for layer, cache in enumerate(self._caches):
            for pool, source in ((self.k, cache.k_cache), (self.v, cache.v_cache)):
                heads, _, dim = source.shape[1:]
                split = source[slot, :, :n].view(heads, -1, self.block_size, dim)
                pool[layer, ids] = split[:, index].transpose(0, 1)  # [n, Hkv, B, D]
