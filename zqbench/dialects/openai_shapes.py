"""The OpenAI chat-completions API's response shapes: a chat.completion body, the chunk
stream's order, the model list. `OpenAIDialect.shapes`; the rules' conventions are in
`zqbench.dialects.shapes`.
"""

from __future__ import annotations

from typing import Any

from zqbench.dialects import shapes
from zqbench.dialects.shapes import ApiShapes
from zqbench.dialects.sse import SSEEvent


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


SHAPES = ApiShapes("chat.completion", openai_completion, openai_stream, openai_models)
