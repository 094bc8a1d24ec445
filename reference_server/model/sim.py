"""The `sim` engine: a calibrated cost model standing in for a model.

It implements `ComputeBackend` exactly as the torch engine does, but instead of
running a network it occupies the step loop for the time the cost model gives:

    prefill step = prefill_base_ms + prefill_per_token_ms * (prompt tokens in the step)
    decode step  = decode_base_ms  + decode_per_seq_ms    * (sequences in the step)

The defaults approximate the `tiny` torch preset on a small CPU (research notes:
decode at batch 8 about 1.9 ms). It sleeps rather than spins: a spinning Python
thread would hold the GIL and stall the asyncio thread that serves HTTP. Tokens
are seeded and deterministic: the same prompt and seed give the same
printable-ASCII text. Greedy decoding (`SamplingParams.greedy`): the text depends on
the prompt alone; sampling also on the request's sampling seed (top_p and top_k are
accepted and have no effect here). Every response says `engine: sim`, so its numbers are
never mistaken for a measurement of a model.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from reference_server.backend import SamplingParams, StepTiming
from reference_server.model import tokenizer


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
    ) -> None:
        if max_slots < 1 or max_seq_len < 2:
            raise ValueError("sim backend needs max_slots >= 1 and max_seq_len >= 2")
        self.max_slots = max_slots
        self.max_seq_len = max_seq_len
        self.vocab_size = tokenizer.VOCAB_SIZE
        self.seed = seed
        self.cost = cost or SimCost()
        self._rngs: dict[int, random.Random] = {}

    def _next(self, slot: int) -> int:
        return self._rngs[slot].randint(tokenizer.GENERATABLE_LOW, tokenizer.GENERATABLE_HIGH)

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        t0 = time.perf_counter()
        n_tokens = sum(len(p) for p in prompts)
        for slot, prompt, p in zip(slots, prompts, params, strict=True):
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
        _occupy(t0 + self.cost.decode_ms(len(slots)) / 1e3)
        nxt = [self._next(s) for s in slots]
        return nxt, StepTiming(wall_ms=(time.perf_counter() - t0) * 1e3, gpu_ms=None)

    def release(self, slot: int) -> None:
        self._rngs.pop(slot, None)

    def start_profile(self) -> None:
        raise ValueError("profiling needs the torch engine on CUDA; this server runs engine sim")

    def stop_profile(self) -> None:
        self.start_profile()
