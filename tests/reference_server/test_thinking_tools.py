"""The reference server thinks and calls tools (#42 item 3), in wire formats the official
SDKs' stream accumulators read back into the same message the server built: the anthropic
package's `messages.stream()` and the openai package's `chat.completions.stream()`.

The plan is exact (reference_server/output_plan.py): N thinking tokens, then the answer;
a tool call's arguments `{"<first string property>": "<generated>"}` fill the tokens left.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.reference_server.conftest import MODEL, Server, start_server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)

LOOKUP = {
    "name": "lookup",
    "description": "look a word up",
    "input_schema": {
        "type": "object",
        "properties": {"limit": {"type": "integer"}, "query": {"type": "string"}},
        "required": ["query"],
    },
}
PREFIX = '{"query": "'  # the forced framing before the generated value, then '"}'
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = start_server("--engine", "sim", "--max-batch-size", "4")
    yield s
    s.stop()


@pytest.fixture
def claude(server: Server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def _dump(blocks: list[Any]) -> list[dict[str, Any]]:
    return [b.model_dump(exclude_none=True) for b in blocks]


def test_anthropic_thinking_streams_a_signed_block_before_the_text(
    claude: anthropic.Anthropic,
) -> None:
    kinds: list[tuple[str, str]] = []
    with claude.messages.stream(
        model=MODEL,
        max_tokens=20,
        thinking={"type": "enabled", "budget_tokens": 8},
        messages=HI,
        extra_body={"seed": 7},
    ) as stream:
        for event in stream:
            if event.type in ("content_block_start", "content_block_delta"):
                inner = event.content_block if event.type == "content_block_start" else event.delta
                kinds.append((event.type, inner.type))
            elif event.type == "message_delta":
                timing = event.model_extra["zq_timing"]
        final = stream.get_final_message()
    assert kinds == [
        ("content_block_start", "thinking"),
        *[("content_block_delta", "thinking_delta")] * 8,
        ("content_block_delta", "signature_delta"),
        ("content_block_start", "text"),
        *[("content_block_delta", "text_delta")] * 12,
    ]
    thinking, text = final.content
    assert thinking.type == "thinking" and len(thinking.thinking) == 8 and thinking.signature
    assert text.type == "text" and len(text.text) == 12
    assert final.usage.output_tokens == 20 and final.stop_reason == "max_tokens"
    # The server's own times: the first token (thinking) went before the first answer token.
    assert timing["received"] <= timing["first_token"] <= timing["first_answer"]
    # Not streamed, the same seed gives the same blocks.
    again = claude.messages.create(
        model=MODEL,
        max_tokens=20,
        thinking={"type": "enabled", "budget_tokens": 8},
        messages=HI,
        extra_body={"seed": 7},
    )
    assert _dump(again.content) == _dump(final.content)
    assert "first_token" not in again.model_extra["zq_timing"]


def test_anthropic_tool_use_streams_its_input_as_json(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=MODEL,
        max_tokens=30,
        tools=[LOOKUP],
        tool_choice={"type": "tool", "name": "lookup"},
        messages=HI,
    ) as stream:
        deltas = [e.delta.partial_json for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    (call,) = final.content
    assert call.type == "tool_use" and call.name == "lookup" and call.id.startswith("toolu_")
    assert len(deltas) == 30 and "".join(deltas) == json.dumps(call.input)
    assert list(call.input) == ["query"] and len(call.input["query"]) == 30 - len(PREFIX) - 2
    assert final.stop_reason == "tool_use" and final.usage.output_tokens == 30
    # The next turn sends the call and its result back: the server reads both as prompt.
    reply = claude.messages.create(
        model=MODEL,
        max_tokens=4,
        messages=[
            *HI,
            {"role": "assistant", "content": [call.model_dump()]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "42"}],
            },
        ],
    )
    assert reply.content[0].type == "text" and reply.usage.output_tokens == 4
    prompt = "\n".join(["hi", json.dumps(call.input), "42"])  # the messages' texts, BOS first
    assert reply.usage.input_tokens + reply.usage.cache_read_input_tokens == 1 + len(prompt)


def test_anthropic_thinking_then_a_tool_call_when_tool_choice_is_auto(
    claude: anthropic.Anthropic,
) -> None:
    final = claude.messages.create(
        model=MODEL,
        max_tokens=24,
        thinking={"type": "enabled", "budget_tokens": 5},
        tools=[LOOKUP],
        messages=HI,
    )
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert len(final.content[1].input["query"]) == 24 - 5 - len(PREFIX) - 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 5}, "tools": [LOOKUP],
             "tool_choice": {"type": "any"}},
            "thinking may not be enabled when tool_choice forces tool use",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 16}},
            "max_tokens (16) must be greater than thinking.budget_tokens",
        ),
        (
            {"thinking": {"type": "on"}},
            "thinking: must be an object whose type is enabled or disabled",
        ),
        (
            {"tools": [LOOKUP], "tool_choice": {"type": "tool", "name": "search"}},
            "tool_choice: no tool named 'search' among the tools offered",
        ),
        (
            {"tool_choice": {"type": "any"}},
            "tool_choice: names a tool, but the request offers no tools",
        ),
        ({"tools": [{"input_schema": {}}]}, "tools[0]: a tool needs a name"),
    ],
)  # fmt: skip
def test_a_plan_the_server_cannot_follow_is_a_400_naming_the_field(
    server: Server, body: dict[str, Any], message: str
) -> None:
    r = httpx.post(
        server.url + "/v1/messages",
        json={"model": MODEL, "max_tokens": 16, "messages": HI, **body},
        timeout=10,
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"] == message


def test_openai_reasoning_and_tool_call_deltas_accumulate_into_the_message(
    gpt: openai.OpenAI,
) -> None:
    tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": LOOKUP["input_schema"]},
    }
    with gpt.chat.completions.stream(
        model=MODEL,
        max_tokens=24,
        messages=HI,
        reasoning_effort="low",  # a quarter of max_tokens: 6
        tools=[tool],
        stream_options={"include_usage": True},
    ) as stream:
        chunks = [e.chunk for e in stream if e.type == "chunk"]
        final = stream.get_final_completion()
    message = final.choices[0].message
    assert message.model_extra is not None and len(message.model_extra["reasoning"]) == 6
    (call,) = message.tool_calls or []
    assert call.function.name == "lookup" and call.id.startswith("call_")
    args = json.loads(call.function.arguments)
    assert len(args["query"]) == 24 - 6 - len(PREFIX) - 2
    assert final.choices[0].finish_reason == "tool_calls"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 24
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 6
    # One chunk per token, as vLLM streams them: 6 reasoning, 18 of the call's arguments.
    pieces = [
        c.choices[0].delta for c in chunks if c.choices and c.choices[0].finish_reason is None
    ]
    assert sum(1 for d in pieces if (d.model_extra or {}).get("reasoning")) == 6
    assert sum(1 for d in pieces if d.tool_calls) == 18


def test_openai_thinking_object_and_the_tool_result_turn(gpt: openai.OpenAI) -> None:
    done = gpt.chat.completions.create(
        model=MODEL,
        max_tokens=10,
        messages=HI,
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 4}},
    )
    message = done.choices[0].message
    assert len(message.model_extra["reasoning"]) == 4 and len(message.content or "") == 6
    assert done.usage is not None and done.usage.completion_tokens_details is not None
    assert done.usage.completion_tokens_details.reasoning_tokens == 4
    reply = gpt.chat.completions.create(
        model=MODEL,
        max_tokens=3,
        messages=[
            *HI,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "lookup", "arguments": '{"query": "x"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        ],
    )  # fmt: skip
    assert reply.choices[0].message.content and reply.usage is not None
    assert reply.usage.completion_tokens == 3


def test_a_reasoning_server_thinks_unless_the_request_turns_it_off() -> None:
    """--thinking-tokens: every request thinks first, and runs out of tokens while
    thinking when max_tokens is smaller."""
    s = start_server("--engine", "sim", "--thinking-tokens", "5")
    try:
        with anthropic.Anthropic(base_url=s.url, api_key="unused", max_retries=0) as claude:
            plain = claude.messages.create(model=MODEL, max_tokens=8, messages=HI)
            off = claude.messages.create(
                model=MODEL,
                max_tokens=8,
                messages=HI,
                thinking={"type": "disabled"},
            )
            short = claude.messages.create(model=MODEL, max_tokens=3, messages=HI)
    finally:
        s.stop()
    assert [
        (b.type, len(getattr(b, "thinking", None) or getattr(b, "text", ""))) for b in plain.content
    ] == [
        ("thinking", 5),
        ("text", 3),
    ]
    assert [b.type for b in off.content] == ["text"]
    assert [(b.type, len(b.thinking)) for b in short.content] == [("thinking", 3)]
    assert short.stop_reason == "max_tokens"
