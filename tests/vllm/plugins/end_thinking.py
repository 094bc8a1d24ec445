"""A vLLM logits processor that ends the reasoning model's thinking after THINKING_TOKENS
tokens, for every request whose prompt opens the thinking:

    serve.sh PORT --reasoning-parser qwen3 --logits-processors end_thinking:EndThinking

Loaded by vLLM's own processes (the venv of setup.sh), never by the tests: serve.sh puts
this folder on their PYTHONPATH. No __init__.py: it is no package of the tests.

Why a processor: make_tiny_model.py --think's weights never choose `</think>`, so without
one a request thinks until max_tokens. vLLM's own cap, the request's `thinking_token_budget`,
is not something zqbench sends on the chat route (it sends the Messages API's `thinking`
object, which vLLM's chat route ignores); its Messages route maps that object onto the cap,
but only from a budget of 1,024. Here every thinking request gets exactly THINKING_TOKENS
thinking tokens, then `</think>`, then an answer to max_tokens (the model never chooses EOS):
counts a test can assert exactly. A prompt that closes the thinking (a turn offered tools:
`<think></think>`) is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

if TYPE_CHECKING:
    from vllm.config import VllmConfig

THINKING_TOKENS = 16
START, END = "<think>", "</think>"


class EndThinking(LogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        from vllm.tokenizers import cached_tokenizer_from_config

        vocab = cached_tokenizer_from_config(vllm_config.model_config).get_vocab()
        self.start, self.end = vocab[START], vocab[END]
        # Batch row -> the request's output tokens (vLLM's own list, which grows as it
        # generates), for the rows whose prompt ends with `<think>`.
        self.thinking: dict[int, list[int]] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it changes the token chosen, greedy or not

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        rows = self.thinking
        for index in batch_update.removed:
            rows.pop(index, None)
        for index, _params, prompt, output in batch_update.added:
            if prompt and prompt[-1] == self.start:
                rows[index] = output
            else:
                rows.pop(index, None)
        for a, b, direction in batch_update.moved:
            moved_a, moved_b = rows.pop(a, None), rows.pop(b, None)
            if moved_a is not None:
                rows[b] = moved_a
            if direction == MoveDirectionality.SWAP and moved_b is not None:
                rows[a] = moved_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, output in self.thinking.items():
            if len(output) == THINKING_TOKENS:
                logits[index] = float("-inf")
                logits[index, self.end] = 0.0
        return logits
