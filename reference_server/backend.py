"""The compute backend interface shared by the schedulers and the engines.

The scheduler's step loop (one thread) owns the backend; nothing else calls it,
except the profiler switches, which are process-wide CUDA calls.
A backend holds a fixed number of sequence slots, each with a preallocated KV
cache of `max_seq_len` positions. Token ids are bytes (0..255) plus specials,
from `reference_server.model.tokenizer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# Temperatures below this are greedy (vLLM's _SAMPLING_EPS): logits / 1e-45 overflow to
# inf and NaN, and well before that the distribution is the argmax in all but name.
MIN_TEMPERATURE = 1e-5


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """How one request picks its tokens. A temperature below MIN_TEMPERATURE (0 included)
    is greedy, and then the other fields do not matter; otherwise tokens are drawn from
    softmax(logits / temperature), restricted to the `top_k` most likely tokens (0 = all)
    and then to the smallest set whose probability reaches `top_p`, with a generator
    seeded by `seed`."""

    temperature: float = 0.0
    seed: int = 0
    top_p: float = 1.0
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        """True when the token is the argmax: temperature below MIN_TEMPERATURE."""
        return self.temperature < MIN_TEMPERATURE


@dataclass(frozen=True, slots=True)
class StepTiming:
    wall_ms: float  # host wall time of the step
    gpu_ms: float | None  # device time from CUDA events; None on CPU and in `sim`


class ComputeBackend(Protocol):
    name: str  # "torch" | "sim"
    device: str  # "cuda", "cpu", or "sim"
    max_slots: int
    max_seq_len: int  # prompt + generated tokens per slot
    vocab_size: int

    def prefill(
        self, slots: list[int], prompts: list[list[int]], params: list[SamplingParams]
    ) -> tuple[list[int], StepTiming]:
        """Fill each slot's KV cache with its prompt; return each one's first generated token."""

    def decode(self, slots: list[int], last_tokens: list[int]) -> tuple[list[int], StepTiming]:
        """One decode step for every listed slot at its own position; return the next tokens."""

    def cached_tokens(self, slot: int) -> int | None:
        """Prompt tokens the slot's last prefill took from the prefix cache instead of
        computing them (whole blocks); None when the backend has no prefix cache."""

    def release(self, slot: int) -> None:
        """Forget a finished sequence; its slot may be reused by the next prefill."""

    def start_profile(self) -> None:
        """Open a CUDA profiler capture range (cudaProfilerStart), for Nsight tools started
        with a cudaProfilerApi capture range. Raises ValueError where there is no CUDA."""

    def stop_profile(self) -> None:
        """Close the capture range (cudaProfilerStop). Raises ValueError where there is no CUDA."""
