"""Token events match the server's usage when it streams one chunk per token (#10).

vLLM (and the APIs themselves) send one chunk per generated token; a token that ends partway
through a multi-byte character arrives with empty text. Each such chunk is a token event; a
role announcement, an empty block opening, a usage chunk or a finish-only trailer is not.
Each SSE frame below is fed as its own piece, so frame i arrives at t = 1001 + i.
"""

from __future__ import annotations

from tests.dialects.frames import (
    A_SPLIT_FRAMES,
    VLLM_DONE,
    VLLM_FRAMES,
    VLLM_ROLE,
    VLLM_TEXT,
    VLLM_TEXTS,
    feed,
    vllm_chunk,
    vllm_content,
    vllm_usage,
)
from zqbench.dialects import AnthropicDialect, OpenAIDialect
from zqbench.dialects.base import DialectConfig, RequestSpec

SPEC = RequestSpec("short", "Say hi", 64)
CONFIG = DialectConfig(model="m")


def openai(frames: list[bytes]):
    parser = OpenAIDialect(CONFIG).parser(SPEC)
    return parser, feed(parser, frames)


def test_the_frames_are_vllms_bytes() -> None:
    assert VLLM_FRAMES[0] == (
        b'data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1764400000,'
        b'"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        b'"logprobs":null,"finish_reason":null}]}\n\n'
    )
    assert VLLM_FRAMES[4] == (
        b'data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1764400000,'
        b'"model":"m","choices":[{"index":0,"delta":{"content":""},'
        b'"logprobs":null,"finish_reason":null}]}\n\n'
    )
    assert VLLM_FRAMES[64] == (
        b'data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1764400000,'
        b'"model":"m","choices":[{"index":0,"delta":{"content":"."},'
        b'"logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'
    )
    assert VLLM_FRAMES[65] == (
        b'data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1764400000,'
        b'"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":76,'
        b'"completion_tokens":64}}\n\n'
    )
    assert len(VLLM_TEXTS) == 64 and VLLM_TEXTS.count("") == 16


def test_vllm_every_token_chunk_is_an_event_empty_ones_included() -> None:
    parser, s = openai(VLLM_FRAMES)
    assert s.error is None and parser.stop_reason == "length"
    assert s.token_events == 64 and (s.output_tokens, s.tokens_from_usage) == (64, True)
    # TTFT is the first token (frame 1), not the role chunk (frame 0, t = 1001).
    assert s.t_first_token == 1002 and s.token_times == list(range(1002, 1066))
    assert s.t_last_token == 1065  # the token on the finish_reason chunk, not the usage chunk
    assert s.text_chars == len(VLLM_TEXT)


def test_vllm_last_token_without_text_beside_finish_reason_counts() -> None:
    """Stopped by the end-of-sequence token, which has no text: `content` "" with "stop"."""
    frames = [
        VLLM_ROLE,
        *[vllm_content(t) for t in VLLM_TEXTS[:63]],
        vllm_content("", '"stop"'),
        vllm_usage(64),
        VLLM_DONE,
    ]
    parser, s = openai(frames)
    assert parser.stop_reason == "stop" and s.output_tokens == 64
    assert s.token_times == list(range(1002, 1066))


def test_an_empty_finish_trailer_past_the_usage_count_is_no_token() -> None:
    """A server that sends its 64 tokens, then `content` "" beside finish_reason."""
    frames = [
        VLLM_ROLE,
        *[vllm_content(t) for t in VLLM_TEXTS],
        vllm_content("", '"stop"'),  # frame 65, t = 1066
        vllm_usage(64),
        VLLM_DONE,
    ]
    _, s = openai(frames)
    assert s.token_events == 64 and s.t_last_token == 1065


def test_without_usage_an_empty_finish_chunk_is_a_token() -> None:
    """No usage to settle it by: one chunk, one token (vLLM's end-of-sequence token)."""
    frames = [VLLM_ROLE, vllm_content("a"), vllm_content("", '"stop"'), VLLM_DONE]
    _, s = openai(frames)
    assert s.token_times == [1002, 1003] and not s.tokens_from_usage


def test_a_token_after_an_empty_finish_chunk_makes_it_a_token() -> None:
    frames = [
        VLLM_ROLE,
        vllm_content("", '"stop"'),
        vllm_content("b"),
        vllm_usage(1),
        VLLM_DONE,
    ]
    _, s = openai(frames)
    assert s.token_times == [1002, 1003]  # in arrival order, even past the usage count


def test_openai_api_stream_role_and_finish_chunks_are_not_tokens() -> None:
    """OpenAI's own stream: role chunk (with `refusal`), tokens, `"delta":{}` beside
    finish_reason, usage. Neither the first nor the last is a token."""
    frames = [
        vllm_chunk('{"role":"assistant","content":"","refusal":null}'),
        vllm_content("Hi"),
        vllm_content(""),
        vllm_content("!"),
        vllm_chunk("{}", '"stop"'),
        vllm_usage(3),
        VLLM_DONE,
    ]
    parser, s = openai(frames)
    assert s.token_times == [1002, 1003, 1004] and s.output_tokens == 3
    assert parser.stop_reason == "stop"


def test_deltas_without_string_content_are_not_tokens() -> None:
    frames = [
        VLLM_ROLE,
        vllm_chunk('{"content":null}'),
        vllm_chunk('{"reasoning_content":""}'),  # reasoning, but empty
        vllm_chunk('{"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}'),  # a name
        vllm_chunk('{"role":"assistant","content":"Hi"}'),  # a role with text: a token
        vllm_usage(1),
        VLLM_DONE,
    ]
    _, s = openai(frames)
    assert s.token_times == [1005] and s.t_first_answer == 1005


def test_a_server_that_packs_tokens_sends_fewer_events_than_usage() -> None:
    """Two tokens a chunk: 32 events, 64 tokens; output_tokens is the server's count."""
    pairs = [VLLM_TEXTS[i] + VLLM_TEXTS[i + 1] for i in range(0, 64, 2)]
    frames = [VLLM_ROLE, *[vllm_content(t) for t in pairs], vllm_usage(64), VLLM_DONE]
    _, s = openai(frames)
    assert s.token_events == 32 and s.output_tokens == 64 and s.tokens_from_usage


def test_anthropic_every_text_delta_is_an_event_empty_ones_included() -> None:
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    s = feed(parser, A_SPLIT_FRAMES)
    assert s.error is None and parser.stop_reason == "max_tokens"
    assert s.token_events == 64 and (s.output_tokens, s.tokens_from_usage) == (64, True)
    # Frames 0-2 are message_start, the empty content_block_start and a ping.
    assert s.t_first_token == 1004 and s.token_times == list(range(1004, 1068))
    assert s.text_chars == len(VLLM_TEXT)
