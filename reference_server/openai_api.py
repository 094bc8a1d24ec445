"""The OpenAI chat-completions dialect: request parsing, JSON body and SSE chunks.

Stream: a role chunk, content chunks, a chunk with finish_reason, then (with
stream_options.include_usage) a usage chunk with empty choices, then `data: [DONE]`.
`zq_timing` rides on the usage chunk, or on the finish chunk without usage.
"""

from __future__ import annotations

import json
import time
from typing import Any

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
    return {
        "prompt_tokens": n_in,
        "completion_tokens": seq.output_tokens,
        "total_tokens": n_in + seq.output_tokens,
        # As vLLM sends it with --enable-prompt-tokens-details: the prompt tokens (of
        # prompt_tokens) that the prefix cache supplied.
        "prompt_tokens_details": {"cached_tokens": seq.cached_tokens},
    }


class Stream:
    """Renders one streamed completion; holds the id, model and include_usage choice."""

    def __init__(self, cid: str, model: str, include_usage: bool) -> None:
        self.cid, self.model, self.include_usage = cid, model, include_usage
        self.created = int(time.time())
        self._extra: dict[str, Any] = {"usage": None} if include_usage else {}

    def _choice(self, delta: dict[str, Any], finish: str | None) -> list[Any]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    def head(self) -> bytes:
        delta = {"role": "assistant", "content": ""}
        return _chunk(self.cid, self.model, self.created, self._choice(delta, None), **self._extra)

    def text(self, text: str) -> bytes:
        choices = self._choice({"content": text}, None)
        return _chunk(self.cid, self.model, self.created, choices, **self._extra)

    def tail(self, seq: Sequence, timing: dict[str, Any]) -> bytes:
        finish = self._choice({}, _FINISH.get(seq.stop_reason or "", "length"))
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
                    "message": {"role": "assistant", "content": seq.text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": _FINISH.get(seq.stop_reason or "", "length"),
                }
            ],
            "usage": _usage(seq),
            "zq_timing": timing,
        }
    ).encode()
