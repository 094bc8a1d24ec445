"""The OpenAI chat-completions API's response shapes: a chat.completion body, the chunk
stream's order, the model list, a streamed tool call and reasoning. `OpenAIDialect.shapes`;
the rules' conventions are in `zqbench.dialects.shapes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from zqbench.dialects import shapes
from zqbench.dialects.shapes import ApiShapes, Reading
from zqbench.dialects.sse import SSEEvent
from zqbench.printable import shown

# Where a delta's reasoning piece is: vLLM 0.32's name, then SGLang's and DeepSeek's.
REASONING = ("reasoning", "reasoning_content")
# finish_reason after a call: "tool_calls"; OpenAI's own API (and vLLM, after it) answers a
# named tool_choice with "stop"; "length" when the call was cut at max_tokens.
CALL_ENDS = ("tool_calls", "stop", "length")


def openai_usage(usage: Any, where: str, problems: list[str]) -> None:
    shapes.usage_counts(
        usage, where, problems, ("prompt_tokens", "completion_tokens", "total_tokens")
    )


@shapes.object_rule
def openai_completion(obj: dict[str, Any], p: list[str]) -> None:
    shapes.need_value(obj, "object", "chat.completion", p)
    shapes.need_str(obj, "id", p)
    shapes.need("created", shapes.is_count(obj.get("created")), p, "not an integer")
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
        shapes.need("choices[0].finish_reason", isinstance(reason, str), p, "not a string")
    openai_usage(obj.get("usage"), "usage", p)


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
        obj = shapes.event_json(event)
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


@shapes.object_rule
def openai_models(obj: dict[str, Any], p: list[str]) -> None:
    shapes.need_value(obj, "object", "list", p)
    for at, m in shapes.model_entries(obj, p):
        shapes.need_value(m, "object", "model", p, at)
        shapes.need_str(m, "id", p, at)
        shapes.need(f"{at}created", shapes.is_count(m.get("created")), p, "not an integer")
        shapes.need_str(m, "owned_by", p, at)


def _deltas(events: list[SSEEvent]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each chunk whose data is a JSON object: where it is, its first choice (or {}), and
    that choice's delta (or {})."""
    for n, event in enumerate(events):
        obj = shapes.event_json(event)
        if not isinstance(obj, dict):
            continue
        choices = obj.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else {}
        choice = choice if isinstance(choice, dict) else {}
        delta = choice.get("delta")
        yield f"event {n}", obj, delta if isinstance(delta, dict) else {}


def _finish(obj: dict[str, Any]) -> Any:
    choices = obj.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first.get("finish_reason") if isinstance(first, dict) else None


def openai_tool_call(events: list[SSEEvent], name: str) -> Reading:
    """delta.tool_calls pieces: the first of a call with its index, id, type "function" and
    function.name (the one asked), the rest with the same index; function.arguments pieces
    that join into a JSON object; then finish_reason tool_calls or stop (length: cut)."""
    p: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    stop = None
    for where, obj, delta in _deltas(events):
        stop = _finish(obj) or stop
        pieces = delta.get("tool_calls")
        if pieces is None:
            continue
        if not isinstance(pieces, list):
            p.append(f"{where}: delta.tool_calls is not a list")
            continue
        for j, piece in enumerate(pieces):
            at = f"{where} tool_calls[{j}]"
            index = piece.get("index") if isinstance(piece, dict) else None
            if not isinstance(index, int) or not shapes.is_count(index):
                p.append(f"{at}: not a piece with an integer index")
                continue
            fn = piece.get("function", {})
            if not isinstance(fn, dict):
                p.append(f"{at}.function: not an object")
                continue
            call = calls.get(index)
            if call is None:  # a call's first piece names it
                call = calls[index] = {"id": piece.get("id"), "name": fn.get("name"), "args": []}
                shapes.need(f"{at}.id", bool(piece.get("id")), p, "not a non-empty string")
                shapes.need_value(piece, "type", "function", p, f"{at}.")
                got = fn.get("name")
                asked = f"{got!r}, the request named {name!r}"
                shapes.need(f"{at}.function.name", got == name, p, asked)
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):
                p.append(f"{at}.function.arguments: not a string")
            elif args:
                call["args"].append(args)
    facts: dict[str, Any] = {"finish_reason": stop, "calls": []}
    if not calls:
        p.append(f"no delta.tool_calls: the named tool was not called (finish_reason {stop!r})")
    unjudged = None
    for index, call in sorted(calls.items()):
        text = "".join(call["args"])
        seen = {"index": index, "id": call["id"], "name": call["name"], "pieces": len(call["args"])}
        facts["calls"].append({**seen, "arguments": shown(text, 400)})
        where = f"tool call {index}"
        unjudged = shapes.arguments_object(text, where, p, cut=stop == "length") or unjudged
    if calls and stop not in CALL_ENDS:
        p.append(f"finish_reason {stop!r} after a call, expected 'tool_calls' or 'stop'")
    return Reading(p, facts, unjudged)


def openai_reasoning(events: list[SSEEvent]) -> Reading:
    """Reasoning pieces (string `reasoning` or `reasoning_content`) before the answer's first
    content or tool call; usage's completion_tokens_details.reasoning_tokens, when given, at
    least one a piece (a piece may carry several, as a content chunk may) and at most
    completion_tokens."""
    p: list[str] = []
    pieces = 0
    answer = None  # where the answer began
    usage: dict[str, Any] = {}
    for where, obj, delta in _deltas(events):
        if isinstance(obj.get("usage"), dict):
            usage = obj["usage"]
        for key in REASONING:
            piece = delta.get(key)
            if piece is not None and not isinstance(piece, str):
                p.append(f"{where}: delta.{key} is not a string")
            elif piece:
                pieces += 1
                if answer is not None:
                    p.append(f"{where}: a reasoning piece after the answer began ({answer})")
        if answer is None and (delta.get("content") or delta.get("tool_calls")):
            answer = where
    details = usage.get("completion_tokens_details")
    tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
    completion = usage.get("completion_tokens")
    facts = {
        "reasoning_pieces": pieces,
        "reasoning_tokens": tokens,
        "completion_tokens": completion,
        "answer_began": answer,
    }
    if tokens is not None:
        if not shapes.is_count(tokens):
            p.append(f"usage.completion_tokens_details.reasoning_tokens {tokens!r}: not a count")
        elif pieces > tokens:
            p.append(f"usage says {tokens} reasoning_tokens for {pieces} reasoning pieces")
        elif shapes.is_count(completion) and tokens > completion:
            p.append(f"reasoning_tokens {tokens} exceed completion_tokens {completion}")
    if pieces or p:
        return Reading(p, facts)
    if shapes.is_count(tokens) and tokens:
        why = f"usage reports {tokens} reasoning_tokens but no piece was streamed (hidden)"
    else:
        why = "the answer carries no reasoning piece: the target does not reason, or not asked so"
    return Reading(p, facts, why)


SHAPES = ApiShapes(
    "chat.completion",
    openai_completion,
    openai_stream,
    openai_models,
    openai_tool_call,
    openai_reasoning,
)
