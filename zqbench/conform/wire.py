"""What an exchange means in each dialect: generated text, first token, errors in the stream.

The checks judge exchanges through these few functions, so that "a text chunk" or "an error
event" is defined once per API (shapes: ../shared/research/reference-server.md §1-2).
"""

from __future__ import annotations

import json
from typing import Any

from zqbench.conform.client import Exchange
from zqbench.dialects.sse import SSEEvent

REFUSAL_STATUSES = (503, 529)  # the zero-queue refusal: overloaded, retry elsewhere or later


def event_json(event: SSEEvent) -> Any:
    """An event's data as JSON; None when it is not JSON (or is `[DONE]`)."""
    try:
        return json.loads(event.data)
    except ValueError:
        return None


def body_json(ex: Exchange) -> Any:
    """The non-streamed body as JSON; None when it is not (or was cut at the cap)."""
    if ex.body_len != len(ex.body):
        return None
    try:
        return json.loads(ex.body)
    except ValueError:
        return None


def text_of(api: str, obj: Any) -> str | None:
    """The generated text one stream event carries, or None if it carries none."""
    if not isinstance(obj, dict):
        return None
    if api == "anthropic":
        delta = obj.get("delta")
        if obj.get("type") == "content_block_delta" and isinstance(delta, dict):
            text = delta.get("text")
            return text if isinstance(text, str) and text else None
        return None
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        if isinstance(delta, dict):
            text = delta.get("content")
            return text if isinstance(text, str) and text else None
    return None


def stream_texts(api: str, ex: Exchange) -> list[tuple[str, int]]:
    """Each text-bearing event of a stream: (text, arrival time)."""
    out = []
    for event, t in ex.events:
        text = text_of(api, event_json(event))
        if text is not None:
            out.append((text, t))
    return out


def first_token_time(api: str, ex: Exchange) -> int | None:
    texts = stream_texts(api, ex)
    return texts[0][1] if texts else None


def stream_error(ex: Exchange) -> Any:
    """The error object a 2xx stream reported (an `error` event or chunk), else None."""
    for event, _ in ex.events:
        obj = event_json(event)
        if event.event == "error":
            return obj if obj is not None else event.data
        if isinstance(obj, dict) and (obj.get("error") or obj.get("type") == "error"):
            return obj
    return None


def classify(api: str, ex: Exchange) -> str:
    """`admitted`, `refused` (a non-2xx status), `refused_in_stream` or `failed` (transport)."""
    if ex.status == 0 or ex.error:
        return "failed"
    if not 200 <= ex.status < 300:
        return "refused"
    if stream_error(ex) is not None:
        return "refused_in_stream"
    return "admitted"


def error_shape_problem(api: str, ex: Exchange) -> str | None:
    """Why a non-2xx body is not the dialect's error JSON; None when it is."""
    obj = body_json(ex)
    if not isinstance(obj, dict):
        return "the body is not a JSON object"
    err = obj.get("error")
    if not isinstance(err, dict):
        return "no `error` object"
    if not isinstance(err.get("message"), str):
        return "error.message is not a string"
    if not isinstance(err.get("type"), str):
        return "error.type is not a string"
    if api == "anthropic" and obj.get("type") != "error":
        return 'top-level "type" is not "error"'
    return None
