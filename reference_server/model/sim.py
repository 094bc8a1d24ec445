"""The `sim` engine: a calibrated cost model standing in for a model.

It implements `ComputeBackend` exactly as the torch engine does, but instead of
running a network it occupies the step loop for the time the cost model gives:

    prefill step = prefill_base_ms + prefill_per_token_ms * (prompt tokens computed in the step)
    decode step  = decode_base_ms  + decode_per_seq_ms    * (sequences in the step; all
                                                           slots with step_shape fixed)

The defaults approximate the `tiny` torch preset on a small CPU (research notes:
decode at batch 8 about 1.9 ms). It sleeps rather than spins: a spinning Python
thread would hold the GIL and stall the asyncio thread that serves HTTP. Tokens
are seeded and deterministic: the same prompt and seed give the same
printable-ASCII text. Greedy decoding (`SamplingParams.greedy`): the text depends on
the prompt alone; sampling also on the request's sampling seed (top_p and top_k are
accepted and have no effect here). Every response says `engine: sim`, so its numbers are
never mistaken for a measurement of a model.

Its prefix cache is the torch engine's index (`prefix_cache.PrefixCache`) without the
tensors: a prompt's cached leading blocks are not computed, so they cost nothing, and they
are reported as the torch engine reports them (`cached_tokens`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from reference_server.backend import SamplingParams, StepTiming
from reference_server.model import tokenizer
from reference_server.model.prefix_cache import DEFAULT_BLOCK_SIZE, PrefixCache


@dataclass(frozen=True, slots=True)
class SimCost:
    prefill_base_ms: float = 1.0
    prefill_per_token_ms: float = 0.01
    decode_base_ms: float = 1.5
    decode_per_seq_ms: float = 0.05

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 0:
                raise ValueError(f"sim cost {name} must be >= 0")

    def prefill_ms(self, tokens: int) -> float:
        return self.prefill_base_ms + self.prefill_per_token_ms * tokens

    def decode_ms(self, batch: int) -> float:
        return self.decode_base_ms + self.decode_per_seq_ms * batch


def _occupy(deadline: float) -> None:
    """Sleep until `deadline` (perf_counter seconds); the modelled step time."""
    remaining = deadline - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


class SimBackend:
    name = "sim"
    device = "sim"

    def __init__(
        self,
        max_slots: int = 8,
        max_seq_len: int = 2048,
        seed: int = 0,
        cost: SimCost | None = None,
        # Off unless asked, so that a benchmark prefilling one prompt again and again computes
        # it every time; the server asks (ServerConfig.prefix_cache_blocks).
        prefix_cache_blocks: int = 0,
        prefix_cache_block_size: int = DEFAULT_BLOCK_SIZE,
        step_shape: str = "dynamic",
    ) -> None:
        if step_shape not in ("dynamic", "fixed"):
            raise ValueError(f"unknown step_shape {step_shape!r}; choose dynamic or fixed")
        if max_slots < 1 or max_seq_len < 2:
            raise ValueError("sim backend needs max_slots >= 1 and max_seq_len >= 2")
        if prefix_cache_blocks < 0:
            raise ValueError("sim backend needs prefix_cache_blocks >= 0 (0 = no cache)")
        self.max_slots = max_slots
        self.max_seq_len = max_seq_len
        self.vocab_size = tokenizer.VOCAB_SIZE
        self.seed = seed
        self.cost = cost or SimCost()
        self.step_shape = step_shape
        self._rngs: dict[int, random.Random] = {}
        self._prefix = (
            PrefixCache(prefix_cache_blocks, prefix_cache_block_size)
            if prefix_cache_blocks > 0
            else None
        )
        self._cached: dict[int, int] = {}  # slot -> prompt tokens its prefill took from the cache

    def _next(self, slot: int) -> int:
        return self._rngs[slot].randint(tokenizer.GENERATABLE_LOW, tokenizer.GENERATABLE_HIGH)

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        t0 = time.perf_counter()
        for slot, prompt in zip(slots, prompts, strict=True):  # every lookup before any store
            self._cached[slot] = self._cached_prefix(prompt)
        n_tokens = sum(len(p) - self._cached[s] for s, p in zip(slots, prompts, strict=True))
        for slot, prompt, p in zip(slots, prompts, params, strict=True):
            if self._prefix is not None:
                self._prefix.store(prompt)
            # Greedy (temperature 0) text depends on the prompt alone, as a model's would;
            # sampled text also on the request's seed. hash() of a tuple of ints does not
            # depend on PYTHONHASHSEED, so both are reproducible across runs.
            seed = () if p.greedy else (p.seed,)
            self._rngs[slot] = random.Random(hash((self.seed, *seed, tuple(prompt))))
        _occupy(t0 + self.cost.prefill_ms(n_tokens) / 1e3)
        first = [self._next(s) for s in slots]
        return first, StepTiming(wall_ms=(time.perf_counter() - t0) * 1e3, gpu_ms=None)

    def decode(self, slots: list[int], last_tokens: list[int]) -> tuple[list[int], StepTiming]:
        t0 = time.perf_counter()
        # Fixed steps cost the full batch, as the torch engine's padded ones do.
        batch = self.max_slots if self.step_shape == "fixed" else len(slots)
        _occupy(t0 + self.cost.decode_ms(batch) / 1e3)
        nxt = [self._next(s) for s in slots]
        return nxt, StepTiming(wall_ms=(time.perf_counter() - t0) * 1e3, gpu_ms=None)

    def _cached_prefix(self, prompt: list[int]) -> int:
        if self._prefix is None:
            return 0
        return len(self._prefix.lookup(prompt)) * self._prefix.block_size

    def cached_tokens(self, slot: int) -> int | None:
        return None if self._prefix is None else self._cached.get(slot, 0)

    def release(self, slot: int) -> None:
        self._rngs.pop(slot, None)
        self._cached.pop(slot, None)

    def start_profile(self) -> None:
        raise ValueError("profiling needs the torch engine on CUDA; this server runs engine sim")

    def stop_profile(self) -> None:
        self.start_profile()
