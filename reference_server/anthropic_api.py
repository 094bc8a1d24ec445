"""The Anthropic Messages dialect: request parsing, JSON body and exact SSE frames.

Stream: message_start, content_block_start, ping, content_block_delta..., content_block_stop,
message_delta (stop_reason, cumulative usage, and our `zq_timing`), message_stop. With
thinking or a tool call (output_plan.py) the blocks are a thinking block (thinking_delta...,
signature_delta), then the text block or a tool_use block (input_json_delta...), each with
its own index; usage.output_tokens counts them all.

Usage as the Messages API defines it: `input_tokens` excludes the prompt tokens read from
the prefix cache (`cache_read_input_tokens`); the two add up to the prompt. message_start
goes out when compute starts, before the prefill has looked in the cache, so its usage
counts the whole prompt as input; message_delta carries the final usage, every field.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from reference_server.output_plan import anthropic_plan
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
        plan=anthropic_plan(b.data, max_tokens),
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


class Stream:
    """Renders one streamed message. Its content blocks follow the tokens: a thinking block
    (closed by its signature), then a text block or a tool_use block whose input streams
    as JSON pieces; each block starts when its first token comes, the first one at once."""

    def __init__(self, seq: Sequence, msg_id: str, model: str) -> None:
        self.seq, self.msg_id, self.model = seq, msg_id, model
        self.index = -1
        self.block: str | None = None  # the open block's kind: thinking, text or tool
        self.thought = ""  # the thinking streamed, which the signature covers

    def head(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.msg_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            # Not read from `seq`: the prefill may be under way, its cached count not yet set.
            "usage": {
                "input_tokens": len(self.seq.prompt),
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        seq = self.seq
        first = "thinking" if seq.thinking_tokens else "tool" if seq.tool else "text"
        return (
            _frame("message_start", {"type": "message_start", "message": message})
            + self._open(first)
            + _frame("ping", {"type": "ping"})
        )

    def piece(self, kind: str, text: str) -> bytes:
        """One token's event: a delta of the open block, after the next block's start when
        the kind changed. An empty piece (text held back) sends no delta."""
        out = b"" if kind == self.block else self._close() + self._open(kind)
        if not text:
            return out
        if kind == "thinking":
            self.thought += text
            if not self.seq.thinking_shown:
                return out
            delta = {"type": "thinking_delta", "thinking": text}
        elif kind == "tool":
            delta = {"type": "input_json_delta", "partial_json": text}
        else:
            delta = {"type": "text_delta", "text": text}
        return out + _frame(
            "content_block_delta",
            {"type": "content_block_delta", "index": self.index, "delta": delta},
        )

    def tail(self, timing: dict[str, Any]) -> bytes:
        seq = self.seq
        return (
            self._close()
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

    def _open(self, kind: str) -> bytes:
        self.index += 1
        self.block = kind
        block: dict[str, Any]
        if kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "tool":
            assert self.seq.tool is not None
            block = {"type": "tool_use", "id": _tool_id(self.msg_id), "name": self.seq.tool.name}
            block["input"] = {}
        else:
            block = {"type": "text", "text": ""}
        start = {"type": "content_block_start", "index": self.index, "content_block": block}
        return _frame("content_block_start", start)

    def _close(self) -> bytes:
        out = b""
        if self.block == "thinking":
            delta = {"type": "signature_delta", "signature": signature(self.thought)}
            out = _frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": self.index, "delta": delta},
            )
        stop = {"type": "content_block_stop", "index": self.index}
        return out + _frame("content_block_stop", stop)


def signature(thinking: str) -> str:
    """An opaque signature of the thinking text, as the Messages API sends one: here a
    digest, so a client that keeps it can send the block back unchanged."""
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


def _tool_id(msg_id: str) -> str:
    return "toolu_" + msg_id.removeprefix("msg_")


def _content(seq: Sequence, msg_id: str) -> list[dict[str, Any]]:
    """The message's content blocks, in the order the stream sends them."""
    blocks: list[dict[str, Any]] = []
    if seq.thinking:
        shown = seq.thinking if seq.thinking_shown else ""
        blocks.append({"type": "thinking", "thinking": shown, "signature": signature(seq.thinking)})
    if seq.tool is not None:
        if len(seq.thinking) == seq.output_tokens:
            return blocks  # it ran out of tokens while thinking
        try:
            arguments = json.loads(seq.tool_args)
        except json.JSONDecodeError:  # cut by max_tokens
            arguments = {}
        blocks.append(
            {"type": "tool_use", "id": _tool_id(msg_id), "name": seq.tool.name, "input": arguments}
        )
    elif seq.output_tokens > len(seq.thinking) or not blocks:
        blocks.append({"type": "text", "text": seq.text})
    return blocks


def stream_error(err_type: str, message: str) -> bytes:
    return _frame("error", {"type": "error", "error": {"type": err_type, "message": message}})


def body(seq: Sequence, msg_id: str, model: str, timing: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": _content(seq, msg_id),
            "stop_reason": seq.stop_reason,
            "stop_sequence": seq.stop_sequence,
            "usage": _usage(seq),
            "zq_timing": timing,
        }
    ).encode()
