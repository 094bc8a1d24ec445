"""The OpenAI chat-completions dialect: request parsing, JSON body and SSE chunks.

Stream: a role chunk, content chunks, a chunk with finish_reason, then (with
stream_options.include_usage) a usage chunk with empty choices, then `data: [DONE]`.
`zq_timing` rides on the usage chunk, or on the finish chunk without usage. Thinking streams
as `delta.reasoning` (vLLM 0.32's name) and counts in usage's
`completion_tokens_details.reasoning_tokens`; a tool call as `delta.tool_calls[0]` pieces,
ending with finish_reason `tool_calls` (output_plan.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

from reference_server.output_plan import openai_plan
from reference_server.request import Body, GenRequest, bad
from reference_server.sequence import Sequence

_ROLES = ("system", "developer", "user", "assistant", "tool")
_FINISH = {"max_tokens": "length", "stop_sequence": "stop"}


def parse(
    body: Any, max_tokens_limit: int, default_max_tokens: int, profile_header: str | None
) -> GenRequest:
    b = Body(body)
    model = b.string("model", required=True)
    key = "max_completion_tokens" if b.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = b.integer(key, 1, max_tokens_limit, default=default_max_tokens)
    b.integer("n", 1, 1, default=1)  # one choice per request
    texts = b.message_texts(_ROLES, f"must be one of {', '.join(_ROLES)}", allow_none=True)
    stream = b.flag("stream")
    opts = b.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise bad("stream_options: must be an object")
    include_usage = bool(opts and Body(opts).flag("include_usage"))
    return b.gen_request(
        model,
        "\n".join(texts),
        max_tokens,
        stop=b.stops("stop", 4),
        stream=stream,
        include_usage=include_usage,
        max_temperature=2.0,
        profile_header=profile_header,
        plan=openai_plan(b.data, max_tokens),
    )


def _chunk(cid: str, model: str, created: int, choices: list[Any], **extra: Any) -> bytes:
    data = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def _usage(seq: Sequence) -> dict[str, Any]:
    n_in = len(seq.prompt)
    usage: dict[str, Any] = {
        "prompt_tokens": n_in,
        "completion_tokens": seq.output_tokens,
        "total_tokens": n_in + seq.output_tokens,
        # As vLLM sends it with --enable-prompt-tokens-details: the prompt tokens (of
        # prompt_tokens) that the prefix cache supplied.
        "prompt_tokens_details": {"cached_tokens": seq.cached_tokens},
    }
    if seq.thinking_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": len(seq.thinking)}
    return usage


def _finish(seq: Sequence) -> str:
    if seq.stop_reason == "tool_use":
        return "tool_calls"
    return _FINISH.get(seq.stop_reason or "", "length")


def _tool_id(cid: str) -> str:
    return "call_" + cid.removeprefix("chatcmpl-")


class Stream:
    """Renders one streamed completion; holds the id, model and include_usage choice."""

    def __init__(self, cid: str, model: str, include_usage: bool) -> None:
        self.cid, self.model, self.include_usage = cid, model, include_usage
        self.created = int(time.time())
        self._extra: dict[str, Any] = {"usage": None} if include_usage else {}
        self._tool_started = False

    def _choice(self, delta: dict[str, Any], finish: str | None) -> list[Any]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    def head(self) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return _chunk(self.cid, self.model, self.created, self._choice(delta, None), **self._extra)

    def piece(self, seq: Sequence, kind: str, text: str) -> bytes:
        """One token's chunk: `reasoning` (vLLM's field) for thinking, `tool_calls` for the
        call's arguments (its id, type and name on the first), `content` for text."""
        delta: dict[str, Any]
        if kind == "thinking":
            delta = {"reasoning": text}
        elif kind == "tool" and seq.tool is not None:
            call: dict[str, Any] = {"index": 0}
            if not self._tool_started:
                self._tool_started = True
                call.update(id=_tool_id(self.cid), type="function")
                call["function"] = {"name": seq.tool.name, "arguments": text}
            else:
                call["function"] = {"arguments": text}
            delta = {"tool_calls": [call]}
        else:
            delta = {"content": text}
        return _chunk(self.cid, self.model, self.created, self._choice(delta, None), **self._extra)

    def tail(self, seq: Sequence, timing: dict[str, Any]) -> bytes:
        finish = self._choice({}, _finish(seq))
        if not self.include_usage:
            out = _chunk(self.cid, self.model, self.created, finish, zq_timing=timing)
        else:
            out = _chunk(self.cid, self.model, self.created, finish, usage=None)
            out += _chunk(
                self.cid, self.model, self.created, [], usage=_usage(seq), zq_timing=timing
            )
        return out + b"data: [DONE]\n\n"

    def error(self, err_type: str, message: str) -> bytes:
        err = {"error": {"message": message, "type": err_type, "param": None, "code": None}}
        return b"data: " + json.dumps(err).encode() + b"\n\n"


def _message(seq: Sequence, cid: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": seq.text, "refusal": None}
    if seq.thinking_tokens:
        message["reasoning"] = seq.thinking
    if seq.tool is not None:
        message["content"] = None
        call = {"name": seq.tool.name, "arguments": seq.tool_args}
        message["tool_calls"] = [{"id": _tool_id(cid), "type": "function", "function": call}]
    return message


def body(seq: Sequence, cid: str, model: str, timing: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "id": cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": _message(seq, cid),
                    "logprobs": None,
                    "finish_reason": _finish(seq),
                }
            ],
            "usage": _usage(seq),
            "zq_timing": timing,
        }
    ).encode()
