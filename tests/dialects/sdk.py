"""A stream's bytes read by the official SDKs' own accumulators (the anthropic and openai
packages), to compare with what zqbench's parser read from the same bytes."""

from __future__ import annotations

import json
from typing import Any

import pydantic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk


def sdk_read(api: str, frames: list[bytes]) -> tuple[str, int, int]:
    """(thinking text, tool calls, output tokens) as the official SDK accumulates them."""
    datas = _datas(frames)
    if api == "openai":
        state = ChatCompletionStreamState()
        usage = None
        for data in datas:
            chunk = ChatCompletionChunk.model_validate(json.loads(data))
            state.handle_chunk(chunk)
            usage = chunk.usage or usage
        message = state.current_completion_snapshot.choices[0].message
        thought = (message.model_extra or {}).get("reasoning", "")
        assert usage is not None
        return thought, len(message.tool_calls or []), usage.completion_tokens
    snapshot = _anthropic_snapshot(datas)
    thought = "".join(b.thinking for b in snapshot.content if b.type == "thinking")
    calls = sum(b.type == "tool_use" for b in snapshot.content)
    return thought, calls, snapshot.usage.output_tokens


def sdk_calls(api: str, frames: list[bytes]) -> list[tuple[str, str, object]]:
    """The tool calls of a stream as the official SDK's accumulator finds them: (id, name,
    arguments) with OpenAI's arguments as their text, the Messages API's input as an object."""
    datas = _datas(frames)
    if api == "openai":
        state = ChatCompletionStreamState()
        for data in datas:
            state.handle_chunk(ChatCompletionChunk.model_validate(json.loads(data)))
        message = state.current_completion_snapshot.choices[0].message
        return [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    snapshot = _anthropic_snapshot(datas)
    return [(b.id, b.name, b.input) for b in snapshot.content if b.type == "tool_use"]


def _datas(frames: list[bytes]) -> list[str]:
    return [
        line[5:].strip()
        for frame in frames
        for line in frame.decode().splitlines()
        if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]


def _anthropic_snapshot(datas: list[str]) -> Any:
    events = pydantic.TypeAdapter(RawMessageStreamEvent)
    snapshot = None
    bufs: dict[int, bytes] = {}
    for data in datas:
        obj = json.loads(data)
        if obj["type"] == "ping":  # the SDK's stream skips pings before accumulating
            continue
        event = events.validate_python(obj)
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    assert snapshot is not None
    return snapshot
