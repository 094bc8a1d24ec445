"""A generation request as both dialects parse it, and the validators they share.

The prompt is the text of the system prompt and every message, joined with
newlines, so a single user message "abc" with no system prompt costs exactly
4 tokens (BOS + 3 bytes): clients can size prompts to the token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reference_server.errors import ApiError
from reference_server.sequence import PROFILES


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


def bad(message: str) -> ApiError:
    return ApiError("invalid_request", message)


def need_dict(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad("request body must be a JSON object")
    return body


def get_str(body: dict[str, Any], key: str, required: bool = False) -> str | None:
    v = body.get(key)
    if v is None:
        if required:
            raise bad(f"{key}: field required")
        return None
    if not isinstance(v, str):
        raise bad(f"{key}: must be a string")
    return v


def get_int(body: dict[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int:
    v = body.get(key, default)
    if v is None:
        raise bad(f"{key}: field required")
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad(f"{key}: must be an integer")
    if not lo <= v <= hi:
        raise bad(f"{key}: must be in {lo}..{hi}, got {v}")
    return v


def get_float(body: dict[str, Any], key: str, lo: float, hi: float, default: float) -> float:
    v = body.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise bad(f"{key}: must be a number")
    if not lo <= v <= hi:
        raise bad(f"{key}: must be in {lo}..{hi}, got {v}")
    return float(v)


def get_bool(body: dict[str, Any], key: str) -> bool:
    v = body.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise bad(f"{key}: must be a boolean")
    return v


def get_seed(body: dict[str, Any]) -> int | None:
    """The request's sampling seed (OpenAI's `seed`; accepted on both routes), or None."""
    if body.get("seed") is None:
        return None
    return get_int(body, "seed", -(2**63), 2**64 - 1)


def get_profile(body: dict[str, Any], header: str | None) -> str:
    """execution_profile from the body (or the x-execution-profile header)."""
    v = body.get("execution_profile", header)
    if v is None:
        return "high-throughput"
    if v not in PROFILES:
        raise bad(f"execution_profile must be one of {', '.join(PROFILES)}")
    return v


def get_stops(v: Any, key: str, max_n: int) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise bad(f"{key}: must be a list of strings")
    if len(v) > max_n:
        raise bad(f"{key}: at most {max_n} entries")
    return tuple(v)


def text_of(content: Any, where: str, allow_none: bool = False) -> str:
    """A message's text: a string, or a list of text blocks joined."""
    if isinstance(content, str):
        return content
    if content is None and allow_none:
        return ""
    if not isinstance(content, list):
        raise bad(f"{where}: content must be a string or a list of blocks")
    parts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise bad(f"{where}[{i}]: only text blocks are supported")
        text = block.get("text")
        if not isinstance(text, str):
            raise bad(f"{where}[{i}].text: must be a string")
        parts.append(text)
    return "".join(parts)
