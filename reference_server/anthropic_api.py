"""The Anthropic Messages dialect: request parsing, JSON body and exact SSE frames.

Stream: message_start, content_block_start, ping, content_block_delta..., content_block_stop,
message_delta (stop_reason, cumulative usage, and our `zq_timing`), message_stop.

Usage as the Messages API defines it: `input_tokens` excludes the prompt tokens read from
the prefix cache (`cache_read_input_tokens`); the two add up to the prompt. message_start
goes out when compute starts, before the prefill has looked in the cache, so its usage
counts the whole prompt as input; message_delta carries the final usage, every field.
"""

from __future__ import annotations

import json
from typing import Any

from reference_server.request import Body, GenRequest, text_of
from reference_server.sequence import Sequence

_ROLES = ("user", "assistant")


def parse(body: Any, max_tokens_limit: int, profile_header: str | None) -> GenRequest:
    b = Body(body)
    model = b.string("model", required=True)
    max_tokens = b.integer("max_tokens", 1, max_tokens_limit)
    system = b.get("system")
    system_text = [] if system is None else [text_of(system, "system")]
    texts = b.message_texts(_ROLES, "must be 'user' or 'assistant'")
    return b.gen_request(
        model,
        "\n".join([*system_text, *texts]),
        max_tokens,
        stop=b.stops("stop_sequences", 16),
        stream=b.flag("stream"),
        include_usage=True,
        max_temperature=1.0,
        profile_header=profile_header,
    )


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _usage(seq: Sequence) -> dict[str, int]:
    return {
        "input_tokens": len(seq.prompt) - seq.cached_tokens,
        "output_tokens": seq.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": seq.cached_tokens,
    }


def stream_head(seq: Sequence, msg_id: str, model: str) -> bytes:
    message: dict[str, Any] = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        # Not read from `seq`: the prefill may be under way, its cached count not yet set.
        "usage": {
            "input_tokens": len(seq.prompt),
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return (
        _frame("message_start", {"type": "message_start", "message": message})
        + _frame(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        + _frame("ping", {"type": "ping"})
    )


def stream_text(text: str) -> bytes:
    return _frame(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )


def stream_tail(seq: Sequence, timing: dict[str, Any]) -> bytes:
    return (
        _frame("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": seq.stop_reason, "stop_sequence": seq.stop_sequence},
                "usage": _usage(seq),
                "zq_timing": timing,
            },
        )
        + _frame("message_stop", {"type": "message_stop"})
    )


def stream_error(err_type: str, message: str) -> bytes:
    return _frame("error", {"type": "error", "error": {"type": err_type, "message": message}})


def body(seq: Sequence, msg_id: str, model: str, timing: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": seq.text}],
            "stop_reason": seq.stop_reason,
            "stop_sequence": seq.stop_sequence,
            "usage": _usage(seq),
            "zq_timing": timing,
        }
    ).encode()
