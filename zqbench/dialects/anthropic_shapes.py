"""The Anthropic Messages API's response shapes: a Message body, the event stream's order,
the model list, a streamed tool call and thinking. `AnthropicDialect.shapes`; the rules'
conventions are in `zqbench.dialects.shapes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from zqbench.dialects import shapes
from zqbench.dialects.shapes import ApiShapes, Reading
from zqbench.dialects.sse import SSEEvent
from zqbench.printable import shown


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


def _events(events: list[SSEEvent]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each event whose data is a JSON object with a type: where it is, its type, its data."""
    for n, event in enumerate(events):
        obj = shapes.event_json(event)
        if isinstance(obj, dict) and isinstance(obj.get("type"), str):
            yield f"event {n} ({obj['type']})", obj["type"], obj


def _delta(obj: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    delta = obj.get("delta")
    return (delta.get("type"), delta) if isinstance(delta, dict) else (None, {})


def anthropic_tool_call(events: list[SSEEvent], name: str) -> Reading:
    """A tool_use block (an id, the name asked, input {}), input_json_delta pieces that join
    into a JSON object, content_block_stop, then stop_reason tool_use (max_tokens: cut)."""
    p: list[str] = []
    calls: list[dict[str, Any]] = []
    block: dict[str, Any] | None = None  # the open tool_use block
    stop = None
    for where, kind, obj in _events(events):
        if kind == "content_block_start":
            start = obj.get("content_block")
            block = None
            if isinstance(start, dict) and start.get("type") == "tool_use":
                block = {"id": start.get("id"), "name": start.get("name"), "pieces": []}
                block |= {"stopped": False}
                calls.append(block)
                got, given = start.get("name"), start.get("input")
                shapes.need(f"{where} id", bool(start.get("id")), p, "not a non-empty string")
                asked = f"{got!r}, the request named {name!r}"
                shapes.need(f"{where} name", got == name, p, asked)
                streams = f"{shown(repr(given), 80)}, not {{}} (the input streams)"
                shapes.need(f"{where} input", given == {}, p, streams)
        elif kind == "content_block_delta" and block is not None:
            delta_type, delta = _delta(obj)
            piece = delta.get("partial_json")
            if delta_type != "input_json_delta" or not isinstance(piece, str):
                p.append(f"{where}: not an input_json_delta with a string partial_json")
            else:
                block["pieces"].append(piece)
        elif kind == "content_block_stop" and block is not None:
            block["stopped"], block = True, None
        elif kind == "message_delta":
            stop = _delta(obj)[1].get("stop_reason")
    facts: dict[str, Any] = {"stop_reason": stop, "calls": []}
    if not calls:
        p.append(f"no tool_use block: the named tool was not called (stop_reason {stop!r})")
    unjudged = None
    for i, call in enumerate(calls):
        text = "".join(call["pieces"])
        seen = {"id": call["id"], "name": call["name"], "pieces": len(call["pieces"])}
        facts["calls"].append({**seen, "input": shown(text, 400)})
        where = f"tool_use block {i}"
        shapes.need(where, call["stopped"], p, "no content_block_stop")
        # No piece, or only empty ones: the input is the {} the block opened with.
        cut = stop == "max_tokens"
        unjudged = shapes.arguments_object(text or "{}", where, p, cut=cut) or unjudged
    if calls and stop not in ("tool_use", "max_tokens"):
        p.append(f"stop_reason {stop!r} after a call, expected 'tool_use' ('max_tokens': cut)")
    return Reading(p, facts, unjudged)


def anthropic_thinking(events: list[SSEEvent]) -> Reading:
    """Thinking blocks before the answer's first text or tool_use block; in each, thinking_delta
    pieces of string thinking, then one signature_delta, then content_block_stop."""
    p: list[str] = []
    blocks = 0
    block: dict[str, Any] | None = None  # the open block
    answer = None  # where the answer's first block started
    for where, kind, obj in _events(events):
        if kind == "content_block_start":
            start = obj.get("content_block")
            btype = start.get("type") if isinstance(start, dict) else None
            block = {"type": btype, "at": where, "signatures": 0}
            if btype in ("thinking", "redacted_thinking"):
                blocks += 1
                if answer is not None:
                    p.append(f"{where}: a {btype} block after the answer began ({answer})")
            elif btype in ("text", "tool_use") and answer is None:
                answer = where
        elif kind == "content_block_delta" and block is not None:
            delta_type, delta = _delta(obj)
            if block["type"] == "thinking":
                _thinking_delta(where, delta_type, delta, block, p)
            elif delta_type in ("thinking_delta", "signature_delta"):
                p.append(f"{where}: a {delta_type} in a {block['type']!r} block")
        elif kind == "content_block_stop" and block is not None:
            if block["type"] == "thinking" and block["signatures"] == 0:
                p.append(
                    f"{where}: the thinking block ({block['at']}) ended without a signature_delta"
                )
            block = None
    facts = {"thinking_blocks": blocks, "answer_began": answer}
    if not blocks and not p:
        return Reading(
            p,
            facts,
            "the answer carries no thinking block: the target does not think, or not when "
            "asked with the thinking object",
        )
    return Reading(p, facts)


def _thinking_delta(
    where: str, delta_type: Any, delta: dict[str, Any], block: dict[str, Any], p: list[str]
) -> None:
    if delta_type == "thinking_delta":
        shapes.need(f"{where} thinking", isinstance(delta.get("thinking"), str), p, "not a string")
        if block["signatures"]:
            p.append(f"{where}: a thinking_delta after the block's signature_delta")
    elif delta_type == "signature_delta":
        signature = delta.get("signature")
        good = isinstance(signature, str) and bool(signature)
        shapes.need(f"{where} signature", good, p, "not a non-empty string")
        block["signatures"] += 1
        if block["signatures"] > 1:
            p.append(f"{where}: a second signature_delta in one thinking block")
    else:
        p.append(f"{where}: a {delta_type!r} delta in a thinking block")


SHAPES = ApiShapes(
    "Message",
    anthropic_message,
    anthropic_stream,
    anthropic_models,
    anthropic_tool_call,
    anthropic_thinking,
)
