"""A conversation's tool calls (#42 item 4): the parser keeps the calls an answer made (id,
name, arguments) as the official SDKs read them, and the next turn sends each call back with
its result, in each API's words, which the reference server accepts.

Each SSE event is fed as its own piece (tests/dialects/frames.feed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.dialects.frames import JSON_HEADERS, feed
from tests.dialects.sdk import sdk_calls
from tests.reference_server.conftest import MODEL, Server, start_server
from zqbench.dialects import get_dialect
from zqbench.dialects.base import (
    DialectConfig,
    Message,
    RequestSpec,
    ResponseSummary,
    ToolCall,
    ToolDef,
    Tools,
)

CONFIG = DialectConfig(model=MODEL)
LOOKUP = ToolDef(
    "lookup",
    "look a word up",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
CALL = Tools((LOOKUP,), "lookup", True)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = start_server("--engine", "sim", "--max-batch-size", "4")
    yield s
    s.stop()


def answered(server: Server, api: str, spec: RequestSpec) -> tuple[list[bytes], ResponseSummary]:
    """`spec` as the dialect writes it, sent to the server: its frames, and what zqbench's
    parser read from them."""
    dialect = get_dialect(api, CONFIG)
    request = dialect.build(spec)
    r = httpx.post(
        server.url + request.path, content=request.body, headers=dict(dialect.headers), timeout=30
    )
    assert r.status_code == 200, (r.text, json.loads(request.body))
    if not spec.stream:
        return [r.content], feed(dialect.parser(spec), [r.content], headers=JSON_HEADERS)
    frames = [e + b"\n\n" for e in r.content.split(b"\n\n") if e]
    return frames, feed(dialect.parser(spec), frames)


def kept(summary: ResponseSummary) -> list[ToolCall]:
    assert summary.calls is not None
    return [ToolCall(c.id, c.name, "".join(c.pieces)) for c in summary.calls]


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "body"])
def test_the_call_an_answer_made_is_kept_as_the_sdk_reads_it(
    server: Server, api: str, stream: bool
) -> None:
    spec = RequestSpec("t", "hi", 24, stream=stream, tools=CALL, keep_answer=True)
    frames, summary = answered(server, api, spec)
    assert summary.error is None and summary.tool_calls == 1
    [call] = kept(summary)
    assert call.name == "lookup" and call.id and len(call.arguments) == 24  # a token a character
    if stream:
        [(sdk_id, sdk_name, sdk_arguments)] = sdk_calls(api, frames)
    else:
        body = json.loads(frames[0])
        if api == "openai":
            [c] = body["choices"][0]["message"]["tool_calls"]
            sdk_id, sdk_name, sdk_arguments = (
                c["id"],
                c["function"]["name"],
                c["function"]["arguments"],
            )
        else:
            [c] = [b for b in body["content"] if b["type"] == "tool_use"]
            sdk_id, sdk_name, sdk_arguments = c["id"], c["name"], c["input"]
    assert (call.id, call.name) == (sdk_id, sdk_name)
    if api == "openai":
        assert call.arguments == sdk_arguments
    else:
        assert json.loads(call.arguments) == sdk_arguments


def test_nothing_is_kept_unless_asked(server: Server) -> None:
    _, summary = answered(server, "openai", RequestSpec("t", "hi", 24, tools=CALL))
    assert summary.tool_calls == 1 and summary.calls is None and summary.answer is None


CALLED = (ToolCall("call_7", "lookup", '{"query": "zq"}'),)
TURN = RequestSpec(
    "t",
    "the result",
    24,
    history=(Message("user", "look zq up"), Message("assistant", "", CALLED)),
    results_for=CALLED,
    tools=CALL,
)


def test_the_next_turn_sends_the_call_and_its_result_in_the_messages_apis_words(
    server: Server,
) -> None:
    body = json.loads(get_dialect("anthropic", CONFIG).build(TURN).body)
    assert body["messages"] == [
        {"role": "user", "content": "look zq up"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_7", "name": "lookup", "input": {"query": "zq"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_7", "content": "the result"}],
        },
    ]
    answered(server, "anthropic", TURN)  # and the server takes it


def test_the_next_turn_sends_the_call_and_its_result_in_chat_completions_words(
    server: Server,
) -> None:
    body = json.loads(get_dialect("openai", CONFIG).build(TURN).body)
    call = {"name": "lookup", "arguments": '{"query": "zq"}'}
    assert body["messages"] == [
        {"role": "user", "content": "look zq up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_7", "type": "function", "function": call}],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "the result"},
    ]
    answered(server, "openai", TURN)


def test_an_answers_text_goes_before_its_call_and_broken_arguments_are_an_empty_input() -> None:
    """A model may write text before its call, and a model's arguments may be no JSON object
    at all (vLLM's tiny random model writes '1499e'): the Messages API's `tool_use.input` must
    be an object, so such a call goes back with `{}`; OpenAI's arguments are text, sent as
    they came."""
    broken = (ToolCall("call_8", "lookup", "1499e"),)
    turn = RequestSpec(
        "t",
        "r",
        24,
        history=(Message("user", "u"), Message("assistant", "let me look", broken)),
        results_for=broken,
    )
    anthropic = json.loads(get_dialect("anthropic", CONFIG).build(turn).body)["messages"][1]
    assert anthropic["content"] == [
        {"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "call_8", "name": "lookup", "input": {}},
    ]
    openai = json.loads(get_dialect("openai", CONFIG).build(turn).body)["messages"][1]
    assert openai["content"] == "let me look"
    assert openai["tool_calls"][0]["function"]["arguments"] == "1499e"
