"""Shape rules for both APIs: each function returns the problems it found (empty = conforms).

Only what the SDKs rely on is required (the fields and events their response types read);
unknown extra fields and unknown event types are allowed, as both APIs promise to add them.
`SHAPES` gives each dialect's rules by its name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zqbench.dialects.sse import SSEEvent


@dataclass(frozen=True, slots=True)
class ApiShapes:
    noun: str  # what a non-streamed response body is called
    body: Callable[[Any], list[str]]  # a non-streamed response body's JSON
    stream: Callable[[list[SSEEvent]], list[str]]  # a streamed response's events
    models: Callable[[Any], list[str]]  # GET /v1/models's JSON


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _need(path: str, ok: bool, problems: list[str], what: str) -> None:
    if not ok:
        problems.append(f"{path}: {what}")


def _json(event: SSEEvent) -> Any:
    """An event's data as JSON; None when it is not (or is `[DONE]`)."""
    try:
        return json.loads(event.data)
    except (ValueError, RecursionError):
        return None


def _usage(usage: Any, where: str, problems: list[str], counts: tuple[str, ...]) -> None:
    """`usage` is an object whose `counts` are token counts."""
    if not isinstance(usage, dict):
        problems.append(f"{where}: not an object")
        return
    for key in counts:
        _need(f"{where}.{key}", _int(usage.get(key)), problems, "not a count")


# ----------------------------------------------------------------- Anthropic
def anthropic_usage(usage: Any, where: str, problems: list[str], *, input_needed: bool) -> None:
    counts = ("input_tokens", "output_tokens") if input_needed else ("output_tokens",)
    _usage(usage, where, problems, counts)


def anthropic_message(obj: Any) -> list[str]:
    """A non-streamed Messages response body."""
    p: list[str] = []
    if not isinstance(obj, dict):
        return ["the body is not a JSON object"]
    _need("type", obj.get("type") == "message", p, f"{obj.get('type')!r} is not 'message'")
    _need("id", isinstance(obj.get("id"), str), p, "not a string")
    _need("role", obj.get("role") == "assistant", p, f"{obj.get('role')!r} is not 'assistant'")
    _need("model", isinstance(obj.get("model"), str), p, "not a string")
    content = obj.get("content")
    if not isinstance(content, list):
        p.append("content: not a list")
    else:
        for i, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                p.append(f"content[{i}]: not a block with a type")
            elif block["type"] == "text" and not isinstance(block.get("text"), str):
                p.append(f"content[{i}].text: not a string")
    _need("stop_reason", isinstance(obj.get("stop_reason"), str), p, "not a string")
    anthropic_usage(obj.get("usage"), "usage", p, input_needed=True)
    return p


_A_BLOCK_EVENTS = ("content_block_start", "content_block_delta", "content_block_stop")


def anthropic_stream(events: list[SSEEvent]) -> list[str]:
    """message_start, then blocks (start, deltas, stop; indexes 0, 1, ...), then one or more
    message_delta, then message_stop last; `ping` and unknown event types anywhere."""
    p: list[str] = []
    state = "start"  # start -> blocks -> in_block -> blocks -> delta -> stopped
    block = -1
    for n, event in enumerate(events):
        name = event.event
        obj = _json(event)
        where = f"event {n} ({name})"
        known = name in ("message_start", *_A_BLOCK_EVENTS, "message_delta", "message_stop")
        if name == "ping" or not known:
            continue
        if not isinstance(obj, dict) or obj.get("type") != name:
            p.append(f"{where}: data is not a JSON object whose type is {name!r}")
            continue
        if state == "stopped":
            p.append(f"{where}: after message_stop")
        elif name == "message_start":
            if state != "start":
                p.append(f"{where}: a second message_start")
            msg = obj.get("message")
            if not isinstance(msg, dict) or msg.get("role") != "assistant":
                p.append(f"{where}: message is not an assistant message")
            else:
                anthropic_usage(msg.get("usage"), f"{where} message.usage", p, input_needed=True)
            state = "blocks"
        elif state == "start":
            p.append(f"{where}: before message_start")
            state = "blocks"
        elif name == "content_block_start":
            if state != "blocks":
                p.append(f"{where}: in state {state}")
            block += 1
            if obj.get("index") != block:
                p.append(f"{where}: index {obj.get('index')!r}, expected {block}")
            state = "in_block"
        elif name in ("content_block_delta", "content_block_stop"):
            if state != "in_block":
                p.append(f"{where}: outside a content block")
            elif obj.get("index") != block:
                p.append(f"{where}: index {obj.get('index')!r}, expected {block}")
            if name == "content_block_delta" and not isinstance(obj.get("delta"), dict):
                p.append(f"{where}: delta is not an object")
            if name == "content_block_stop":
                state = "blocks"
        elif name == "message_delta":
            if state == "in_block":
                p.append(f"{where}: before content_block_stop")
            delta = obj.get("delta")
            if not isinstance(delta, dict) or "stop_reason" not in delta:
                p.append(f"{where}: delta has no stop_reason")
            anthropic_usage(obj.get("usage"), f"{where} usage", p, input_needed=False)
            state = "delta"
        elif name == "message_stop":
            if state != "delta":
                p.append(f"{where}: not after message_delta")
            state = "stopped"
    if state != "stopped":
        p.append(f"the stream ended without message_stop (state {state})")
    return p


def anthropic_models(obj: Any) -> list[str]:
    p: list[str] = []
    if not isinstance(obj, dict):
        return ["the body is not a JSON object"]
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        return ["data: not a non-empty list"]
    for i, m in enumerate(data):
        if not isinstance(m, dict):
            p.append(f"data[{i}]: not an object")
            continue
        _need(f"data[{i}].type", m.get("type") == "model", p, f"{m.get('type')!r} != 'model'")
        _need(f"data[{i}].id", isinstance(m.get("id"), str), p, "not a string")
    _need("has_more", isinstance(obj.get("has_more"), bool), p, "not a boolean")
    return p


# ----------------------------------------------------------------- OpenAI
def openai_usage(usage: Any, where: str, problems: list[str]) -> None:
    _usage(usage, where, problems, ("prompt_tokens", "completion_tokens", "total_tokens"))


def openai_completion(obj: Any) -> list[str]:
    p: list[str] = []
    if not isinstance(obj, dict):
        return ["the body is not a JSON object"]
    _need("object", obj.get("object") == "chat.completion", p, f"{obj.get('object')!r}")
    _need("id", isinstance(obj.get("id"), str), p, "not a string")
    _need("created", _int(obj.get("created")), p, "not an integer")
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        p.append("choices: not a non-empty list of objects")
    else:
        msg = choices[0].get("message")
        if not isinstance(msg, dict) or msg.get("role") != "assistant":
            p.append("choices[0].message: not an assistant message")
        elif not isinstance(msg.get("content"), str):
            p.append("choices[0].message.content: not a string")
        reason = choices[0].get("finish_reason")
        _need("choices[0].finish_reason", isinstance(reason, str), p, "not a string")
    openai_usage(obj.get("usage"), "usage", p)
    return p


def openai_stream(events: list[SSEEvent], *, include_usage: bool = True) -> list[str]:
    """Chunks of `chat.completion.chunk`, one finish_reason, then (with include_usage) a
    chunk with `choices: []` and usage, then `data: [DONE]` last."""
    p: list[str] = []
    finished = usage_seen = done = False
    for n, event in enumerate(events):
        where = f"event {n}"
        if done:
            p.append(f"{where}: after [DONE]")
            break
        if event.data == "[DONE]":
            done = True
            continue
        obj = _json(event)
        if not isinstance(obj, dict):
            p.append(f"{where}: data is not a JSON object")
            continue
        if obj.get("object") != "chat.completion.chunk":
            p.append(f"{where}: object {obj.get('object')!r} is not 'chat.completion.chunk'")
        choices = obj.get("choices")
        if not isinstance(choices, list):
            p.append(f"{where}: choices is not a list")
            continue
        if not choices:  # the usage chunk
            if obj.get("usage") is None:
                p.append(f"{where}: empty choices without usage")
            else:
                openai_usage(obj.get("usage"), f"{where} usage", p)
                usage_seen = True
            continue
        if usage_seen:
            p.append(f"{where}: a content chunk after the usage chunk")
        choice = choices[0]
        if not isinstance(choice, dict) or not isinstance(choice.get("delta"), dict):
            p.append(f"{where}: choices[0].delta is not an object")
            continue
        reason = choice.get("finish_reason")
        if reason is not None:
            if finished:
                p.append(f"{where}: a second finish_reason")
            finished = True
        elif finished:
            p.append(f"{where}: a content chunk after finish_reason")
    if not finished:
        p.append("no chunk carried a finish_reason")
    if include_usage and not usage_seen:
        p.append("stream_options.include_usage was set but no usage chunk came")
    if not done:
        p.append("the stream did not end with data: [DONE]")
    return p


def openai_models(obj: Any) -> list[str]:
    p: list[str] = []
    if not isinstance(obj, dict):
        return ["the body is not a JSON object"]
    _need("object", obj.get("object") == "list", p, f"{obj.get('object')!r} != 'list'")
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        return [*p, "data: not a non-empty list"]
    for i, m in enumerate(data):
        if not isinstance(m, dict):
            p.append(f"data[{i}]: not an object")
            continue
        _need(f"data[{i}].object", m.get("object") == "model", p, f"{m.get('object')!r}")
        _need(f"data[{i}].id", isinstance(m.get("id"), str), p, "not a string")
        _need(f"data[{i}].created", _int(m.get("created")), p, "not an integer")
        _need(f"data[{i}].owned_by", isinstance(m.get("owned_by"), str), p, "not a string")
    return p


SHAPES = {
    "anthropic": ApiShapes("Message", anthropic_message, anthropic_stream, anthropic_models),
    "openai": ApiShapes("chat.completion", openai_completion, openai_stream, openai_models),
}
