"""Cached prompt tokens from each API's usage: what the server's prefix cache supplied."""

from __future__ import annotations

import json

from tests.dialects.frames import JSON_HEADERS, feed
from zqbench.dialects import AnthropicDialect, OpenAIDialect
from zqbench.dialects.base import DialectConfig, RequestSpec

NOSTREAM = RequestSpec("c", "hi", 8, stream=False)
CONFIG = DialectConfig(model="m")


def _openai(usage: dict) -> object:
    body = {
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}],
        "usage": usage,
    }  # fmt: skip
    parser = OpenAIDialect(CONFIG).parser(NOSTREAM)
    return feed(parser, [json.dumps(body).encode()], headers=JSON_HEADERS)


def _anthropic(usage: dict) -> object:
    body = {
        "id": "m1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": usage,
    }  # fmt: skip
    parser = AnthropicDialect(CONFIG).parser(NOSTREAM)
    return feed(parser, [json.dumps(body).encode()], headers=JSON_HEADERS)


def test_openai_reads_prompt_tokens_details() -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
    plain = _openai(usage)
    assert (plain.prompt_tokens, plain.cached_tokens) == (40, None)  # not said: not 0
    cached = _openai({**usage, "prompt_tokens_details": {"cached_tokens": 32}})
    assert (cached.prompt_tokens, cached.cached_tokens) == (40, 32)
    assert _openai({**usage, "prompt_tokens_details": None}).cached_tokens is None


def test_anthropic_counts_the_cached_tokens_into_the_prompt() -> None:
    # input_tokens leaves out the cache's share (Anthropic's API, and vLLM's adapter).
    plain = _anthropic({"input_tokens": 40, "output_tokens": 2})
    assert (plain.prompt_tokens, plain.cached_tokens) == (40, None)
    read = _anthropic({"input_tokens": 8, "output_tokens": 2, "cache_read_input_tokens": 32})
    assert (read.prompt_tokens, read.cached_tokens) == (40, 32)
    both = _anthropic({"input_tokens": 8, "output_tokens": 2, "cache_read_input_tokens": 0,
                       "cache_creation_input_tokens": 32})  # fmt: skip
    assert (both.prompt_tokens, both.cached_tokens) == (40, 0)
