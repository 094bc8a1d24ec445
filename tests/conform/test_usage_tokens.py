"""api.*.3 judges what the dialect's parser read against the stream's usage.

OpenAI-compatible streams carry one chunk per token: it passes on one chunk per token, empty
ones included, and on a chunk that carried two (llama.cpp's server, a lagging vLLM); it
fails on more chunks than tokens. The evidence holds the stream's bytes. The Messages API's text
deltas may hold several tokens (Anthropic's own API, vLLM's adapter): fewer deltas than
tokens pass, more deltas than tokens fail."""

from __future__ import annotations

import pytest

from tests.conform.util import recorded
from tests.dialects.frames import (
    A_EVENTS,
    A_SPLIT_FRAMES,
    VLLM_DONE,
    VLLM_FRAMES,
    VLLM_ROLE,
    VLLM_TEXTS,
    a_delta,
    a_frame,
    vllm_content,
    vllm_usage,
)
from zqbench.conform.checks.api import usage_tokens
from zqbench.conform.context import Target
from zqbench.conform.observations import Observations
from zqbench.conform.options import ConformOptions


def frames_of(texts: list[str], *, usage: int) -> list[bytes]:
    """A vLLM stream of `texts`, one chunk each, the last with finish_reason "length"."""
    tokens = [vllm_content(t) for t in texts[:-1]]
    return [VLLM_ROLE, *tokens, vllm_content(texts[-1], '"length"'), vllm_usage(usage), VLLM_DONE]


def judged(api: str, frames: list[bytes]):
    """usage_tokens on observations whose streamed exchange is `frames` (nothing is sent)."""
    target = Target(ConformOptions(target="http://127.0.0.1:9", apis=(api,)))
    obs = Observations(target, {f"api.{api}.stream": [(api, recorded(api, frames))]})
    return usage_tokens(obs, api)


@pytest.mark.parametrize(
    ("api", "frames"), [("openai", VLLM_FRAMES), ("anthropic", A_SPLIT_FRAMES)]
)
def test_one_chunk_per_token_with_empty_ones_passes(api: str, frames: list[bytes]) -> None:
    result = judged(api, frames)
    assert result.status == "pass", result.reason
    counts = {k: v for k, v in result.evidence.items() if k != "stream"}
    assert counts == {"usage_output_tokens": 64, "text_events": 64}
    assert result.evidence["stream"] == b"".join(frames).decode()  # under 16 KiB: whole


def test_fewer_chunks_than_usage_pass_as_tokens_carried_together() -> None:
    """Two tokens packed into one chunk: 63 events against a usage of 64."""
    texts = [VLLM_TEXTS[0] + VLLM_TEXTS[1], *VLLM_TEXTS[2:]]
    result = judged("openai", frames_of(texts, usage=64))
    assert result.status == "pass"
    assert result.reason == "64 tokens reported in 63 chunks: 1 carried in a chunk with another"


def test_more_chunks_than_usage_fails() -> None:
    result = judged("openai", frames_of(VLLM_TEXTS, usage=63))
    assert result.status == "fail"
    assert result.reason == "usage says 63 output tokens, 64 were streamed"


def anthropic_frames(texts: list[str], *, usage: int) -> list[bytes]:
    head = [a_frame(*A_EVENTS[0]), a_frame(*A_EVENTS[1]), a_frame(*A_EVENTS[2])]
    tail = a_frame(
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},'
        f'"usage":{{"output_tokens":{usage}}}}}',
    )
    stop = a_frame("content_block_stop", '{"type":"content_block_stop","index":0}')
    end = a_frame("message_stop", '{"type":"message_stop"}')
    return [*head, *[a_delta(t) for t in texts], stop, tail, end]


def test_anthropic_deltas_of_several_tokens_pass() -> None:
    """vLLM's Messages adapter: 58 deltas for 64 tokens (a split character's bytes merged)."""
    texts = ["".join(VLLM_TEXTS[i : i + 2]) for i in range(0, 12, 2)] + VLLM_TEXTS[12:]
    result = judged("anthropic", anthropic_frames(texts, usage=64))
    assert result.status == "pass", result.reason
    assert result.reason == "64 tokens reported in 58 text deltas"


def test_anthropic_more_deltas_than_tokens_fails() -> None:
    result = judged("anthropic", anthropic_frames(VLLM_TEXTS, usage=63))
    assert result.status == "fail"
    assert result.reason == "usage says 63 output tokens for 64 text deltas"
