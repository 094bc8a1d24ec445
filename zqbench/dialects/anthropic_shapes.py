"""The Anthropic Messages API's response shapes: a Message body, the event stream's order,
the model list. `AnthropicDialect.shapes`; the rules' conventions are in
`zqbench.dialects.shapes`.
"""

from __future__ import annotations

from typing import Any

from zqbench.dialects import shapes
from zqbench.dialects.shapes import ApiShapes
from zqbench.dialects.sse import SSEEvent


def anthropic_usage(usage: Any, where: str, problems: list[str], *, input_needed: bool) -> None:
    counts = ("input_tokens", "output_tokens") if input_needed else ("output_tokens",)
    shapes.usage_counts(usage, where, problems, counts)


@shapes.object_rule
def anthropic_message(obj: dict[str, Any], p: list[str]) -> None:
    """A non-streamed Messages response body."""
    shapes.need_value(obj, "type", "message", p)
    shapes.need_str(obj, "id", p)
    shapes.need_value(obj, "role", "assistant", p)
    shapes.need_str(obj, "model", p)
    content = obj.get("content")
    if not isinstance(content, list):
        p.append("content: not a list")
    else:
        for i, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                p.append(f"content[{i}]: not a block with a type")
            elif block["type"] == "text" and not isinstance(block.get("text"), str):
                p.append(f"content[{i}].text: not a string")
    shapes.need_str(obj, "stop_reason", p)
    anthropic_usage(obj.get("usage"), "usage", p, input_needed=True)


_A_BLOCK_EVENTS = ("content_block_start", "content_block_delta", "content_block_stop")


def anthropic_stream(events: list[SSEEvent]) -> list[str]:
    """message_start, then blocks (start, deltas, stop; indexes 0, 1, ...), then one or more
    message_delta, then message_stop last; `ping` and unknown event types anywhere."""
    p: list[str] = []
    state = "start"  # start -> blocks -> in_block -> blocks -> delta -> stopped
    block = -1
    for n, event in enumerate(events):
        name = event.event
        obj = shapes.event_json(event)
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


@shapes.object_rule
def anthropic_models(obj: dict[str, Any], p: list[str]) -> None:
    for at, m in shapes.model_entries(obj, p):
        shapes.need_value(m, "type", "model", p, at)
        shapes.need_str(m, "id", p, at)
    shapes.need("has_more", isinstance(obj.get("has_more"), bool), p, "not a boolean")


SHAPES = ApiShapes("Message", anthropic_message, anthropic_stream, anthropic_models)
