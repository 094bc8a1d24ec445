"""A generation request as both dialects parse it, the body reader they share, and the
size limit checked before a body is parsed.

The prompt is the text of the system prompt and every message, joined with
newlines, so a single user message "abc" with no system prompt costs exactly
4 tokens (BOS + 3 bytes): clients can size prompts to the token.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from reference_server.errors import ApiError
from reference_server.output_plan import NO_PLAN, OutputPlan
from reference_server.sequence import PROFILES

# A generation body may carry this many bytes per context token, plus a fixed allowance.
# JSON escapes (6 bytes for one token at worst), per-message framing and pretty-printing
# stay well below it; a larger body is refused as too large before it is read in full,
# so a huge prompt is never parsed nor tokenized, and never stalls the event loop.
BODY_BYTES_PER_TOKEN = 64
BODY_ALLOWANCE = 1 << 20


def body_limit(configured: int, max_context: int) -> int:
    """The most bytes a generation (or count_tokens) body may have: `configured`
    (--body-limit), or less when no prompt that long could fit `max_context` tokens."""
    return min(configured, BODY_ALLOWANCE + BODY_BYTES_PER_TOKEN * max_context)


@dataclass(frozen=True, slots=True)
class GenRequest:
    model: str
    prompt_text: str
    max_tokens: int
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    temperature: float
    seed: int | None  # None: the server derives one (api.App.sampling)
    top_p: float
    top_k: int
    profile: str
    plan: OutputPlan = NO_PLAN  # thinking and tool call (output_plan.py)


def bad(message: str) -> ApiError:
    return ApiError("invalid_request", message)


class Body:
    """A request's JSON object, read key by key; a bad value is a 400 that names the key.

    `obj` is the parsed JSON; anything but an object is refused here."""

    def __init__(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise bad("request body must be a JSON object")
        self.data: dict[str, Any] = obj

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def string(self, key: str, required: bool = False) -> str | None:
        v = self.data.get(key)
        if v is None:
            if required:
                raise bad(f"{key}: field required")
            return None
        if not isinstance(v, str):
            raise bad(f"{key}: must be a string")
        return v

    def integer(self, key: str, lo: int, hi: int, default: int | None = None) -> int:
        v = self.data.get(key, default)
        if v is None:
            raise bad(f"{key}: field required")
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad(f"{key}: must be an integer")
        if not lo <= v <= hi:
            raise bad(f"{key}: must be in {lo}..{hi}, got {v}")
        return v

    def number(self, key: str, lo: float, hi: float, default: float) -> float:
        v = self.data.get(key, default)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise bad(f"{key}: must be a number")
        if not lo <= v <= hi:
            raise bad(f"{key}: must be in {lo}..{hi}, got {v}")
        return float(v)

    def flag(self, key: str) -> bool:
        v = self.data.get(key, False)
        if v is None:
            return False
        if not isinstance(v, bool):
            raise bad(f"{key}: must be a boolean")
        return v

    def stops(self, key: str, max_n: int) -> tuple[str, ...]:
        v = self.data.get(key)
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            raise bad(f"{key}: must be a list of strings")
        if len(v) > max_n:
            raise bad(f"{key}: at most {max_n} entries")
        return tuple(v)

    def message_texts(
        self, roles: tuple[str, ...], role_rule: str, allow_none: bool = False
    ) -> list[str]:
        """The text of each of `messages`: a non-empty list of objects whose `role` is one of
        `roles` (`role_rule` says which in the error); `allow_none`: content may be null."""
        messages = self.data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise bad("messages: must be a non-empty list")
        texts = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise bad(f"messages[{i}]: must be an object")
            if m.get("role") not in roles:
                raise bad(f"messages[{i}].role: {role_rule}")
            texts.append(text_of(m.get("content"), f"messages[{i}].content", allow_none))
        return texts

    def gen_request(
        self,
        model: str | None,
        prompt_text: str,
        max_tokens: int,
        stop: tuple[str, ...],
        stream: bool,
        include_usage: bool,
        *,
        max_temperature: float,
        profile_header: str | None,
        plan: OutputPlan = NO_PLAN,
    ) -> GenRequest:
        """The request, with the sampling fields both APIs spell alike read here (last)."""
        return GenRequest(
            model=model or "",
            prompt_text=prompt_text,
            max_tokens=max_tokens,
            stop=stop,
            stream=stream,
            include_usage=include_usage,
            temperature=self.number("temperature", 0.0, max_temperature, 0.0),
            # OpenAI's field; the Anthropic route takes it too (the SDK's extra_body).
            seed=self._seed(),
            top_p=self.number("top_p", 0.0, 1.0, 1.0),
            top_k=self.integer("top_k", 0, 2**31 - 1, default=0),  # vLLM's extension on OpenAI
            profile=self._profile(profile_header),
            plan=plan,
        )

    def _seed(self) -> int | None:
        """The request's sampling seed, or None: the server derives one."""
        if self.data.get("seed") is None:
            return None
        return self.integer("seed", -(2**63), 2**64 - 1)

    def _profile(self, header: str | None) -> str:
        """execution_profile from the body (or the x-execution-profile header)."""
        v = self.data.get("execution_profile", header)
        if v is None:
            return "high-throughput"
        if v not in PROFILES:
            raise bad(f"execution_profile must be one of {', '.join(PROFILES)}")
        return v


def text_of(content: Any, where: str, allow_none: bool = False) -> str:
    """A message's text: a string, or a list of blocks joined. A text block gives its text,
    a tool call its input as JSON, a tool result its content; earlier thinking gives
    nothing, as the Messages API drops it from the context."""
    if isinstance(content, str):
        return content
    if content is None and allow_none:
        return ""
    if not isinstance(content, list):
        raise bad(f"{where}: content must be a string or a list of blocks")
    parts = []
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise bad(f"{where}[{i}].text: must be a string")
            parts.append(text)
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input")))
        elif kind == "tool_result":
            parts.append(text_of(block.get("content"), f"{where}[{i}].content", True))
        elif kind not in ("thinking", "redacted_thinking"):
            raise bad(
                f"{where}[{i}]: only text, tool_use, tool_result and thinking blocks are supported"
            )
    return "".join(parts)
