"""Thinking and tool-call tokens are token events of their kind (#42 item 1): TTFT is the first
token of any kind, `t_first_answer` the first text or tool-call token, and ITL runs over them
all. Read from the reference server's own streams (which the official SDKs accept,
tests/reference_server/test_thinking_tools.py) and from vLLM's and SGLang's field names.

Each SSE event is fed as its own piece, so the i-th event arrives at t = 1001 + i.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.dialects.frames import JSON_HEADERS, feed, vllm_chunk, vllm_content, vllm_usage
from tests.dialects.sdk import sdk_read
from tests.reference_server.conftest import MODEL, Server, start_server
from zqbench.dialects import AnthropicDialect, OpenAIDialect, get_dialect
from zqbench.dialects.base import (
    OMITTED,
    REDACTED,
    TEXT,
    THINKING,
    TOOL,
    DialectConfig,
    RequestSpec,
    ToolDef,
    Tools,
)

SPEC = RequestSpec("short", "hi", 20)
CONFIG = DialectConfig(model=MODEL)
LOOKUP = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = start_server("--engine", "sim", "--max-batch-size", "4")
    yield s
    s.stop()


def events_of(server: Server, path: str, body: dict) -> list[bytes]:
    """The server's stream, cut into its SSE events."""
    r = httpx.post(server.url + path, json={"model": MODEL, "stream": True, **body}, timeout=30)
    assert r.status_code == 200, r.text
    return [e + b"\n\n" for e in r.content.split(b"\n\n") if e]


def sent(server: Server, dialect: Any, spec: RequestSpec) -> list[bytes]:
    """`spec` as the dialect writes it, sent to the server: its stream, cut into events."""
    request = dialect.build(spec)
    r = httpx.post(
        server.url + request.path, content=request.body, headers=dict(dialect.headers), timeout=30
    )
    assert r.status_code == 200, (r.text, json.loads(request.body))
    return [e + b"\n\n" for e in r.content.split(b"\n\n") if e]


def test_anthropic_thinking_then_text(server: Server) -> None:
    body = {"max_tokens": 20, "thinking": {"type": "enabled", "budget_tokens": 8}}
    frames = events_of(
        server, "/v1/messages", {**body, "messages": [{"role": "user", "content": "hi"}]}
    )
    # message_start, thinking block start, ping: the first thinking delta is event 3.
    s = feed(AnthropicDialect(CONFIG).parser(SPEC), frames)
    assert s.error is None and s.output_tokens == 20
    assert (s.token_events, s.reasoning_events, s.tool_events, s.text_chars) == (20, 8, 0, 12)
    assert s.carried == THINKING | TEXT
    # After 8 thinking deltas: the signature, the block's stop, the text block's start.
    assert s.t_first_token == 1004 and s.t_first_answer == 1004 + 8 + 3
    assert len(s.token_gaps) == 19  # ITL over every token, thinking included


def test_anthropic_tool_call(server: Server) -> None:
    body = {
        "max_tokens": 20,
        "tools": [{"name": "lookup", "input_schema": LOOKUP}],
        "tool_choice": {"type": "tool", "name": "lookup"},
        "messages": [{"role": "user", "content": "hi"}],
    }
    s = feed(AnthropicDialect(CONFIG).parser(SPEC), events_of(server, "/v1/messages", body))
    assert s.error is None and s.carried == TOOL and s.tool_calls == 1
    assert (s.token_events, s.tool_events, s.text_chars) == (20, 20, 0)
    assert s.t_first_token == s.t_first_answer == 1004


def test_openai_reasoning_then_a_tool_call(server: Server) -> None:
    body = {
        "max_tokens": 20,
        "reasoning_effort": "low",  # 5 of 20
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": LOOKUP}}],
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    frames = events_of(server, "/v1/chat/completions", body)
    s = feed(OpenAIDialect(CONFIG).parser(SPEC), frames)
    assert s.error is None and s.output_tokens == 20 and s.reasoning_tokens == 5
    assert (s.token_events, s.reasoning_events, s.tool_events) == (20, 5, 15)
    assert s.carried == THINKING | TOOL and s.tool_calls == 1
    assert s.t_first_token == 1002 and s.t_first_answer == 1002 + 5  # after the role chunk


def test_sglang_reasoning_content_and_vllm_reasoning_are_thinking() -> None:
    frames = [
        vllm_chunk('{"role":"assistant","content":null,"reasoning_content":"Let"}'),
        vllm_chunk('{"content":null,"reasoning":" me"}'),
        vllm_chunk('{"content":"","reasoning_content":" see"}'),  # "" beside reasoning
        vllm_content("Hi"),
        vllm_usage(4),
        b"data: [DONE]\n\n",
    ]
    s = feed(OpenAIDialect(CONFIG).parser(SPEC), frames)
    assert s.token_times == [1001, 1002, 1003, 1004] and s.reasoning_events == 3
    assert s.t_first_token == 1001 and s.t_first_answer == 1004 and s.text_chars == 2


def test_thinking_not_shown_is_one_token_at_its_blocks_start(server: Server) -> None:
    """display "omitted" (the newest Claude models' default) streams the thinking block with
    its signature only: its start is the model's first token, so TTFT still marks the start
    of generation and the thinking is never read as a queue."""
    body = {
        "max_tokens": 20,
        "thinking": {"type": "enabled", "budget_tokens": 8, "display": "omitted"},
        "messages": [{"role": "user", "content": "hi"},
    ]}  # fmt: skip
    frames = events_of(server, "/v1/messages", body)
    assert b"thinking_delta" not in b"".join(frames)
    s = feed(AnthropicDialect(CONFIG).parser(SPEC), frames)
    assert s.error is None and s.output_tokens == 20
    assert (s.token_events, s.reasoning_events, s.text_chars) == (13, 1, 12)
    assert s.carried == THINKING | OMITTED | TEXT
    # message_start is event 0, the thinking block's start event 1; then ping, the
    # signature, the block's stop, the text block's start: the first text delta is event 6.
    assert s.t_first_token == 1002 and s.t_first_answer == 1007


def test_a_redacted_block_in_a_stream_is_a_thinking_token() -> None:
    frames = [
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
        b'{"input_tokens":3,"output_tokens":1}}}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}}\n\n',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
        b'"content_block":{"type":"text","text":""}}\n\n',
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
        b'"delta":{"type":"text_delta","text":"Hi"}}\n\n',
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"end_turn"},"usage":{"output_tokens":9}}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    s = feed(AnthropicDialect(CONFIG).parser(SPEC), frames)
    assert s.error is None and s.carried == THINKING | REDACTED | TEXT
    assert s.token_times == [1002, 1005] and s.reasoning_events == 1
    assert s.t_first_token == 1002 and s.t_first_answer == 1005


def _thinking_then(usage_reasoning: int | None) -> tuple[int | None, bool]:
    """Three reasoning pieces and one text chunk, then usage with its reasoning count."""
    details = "" if usage_reasoning is None else (
        f',"completion_tokens_details":{{"reasoning_tokens":{usage_reasoning}}}'
    )  # fmt: skip
    usage = vllm_usage(4).replace(
        b'"completion_tokens":4', b'"completion_tokens":4' + details.encode()
    )
    frames = [
        vllm_chunk('{"role":"assistant","content":null,"reasoning":"Let"}'),
        vllm_chunk('{"content":null,"reasoning":" me"}'),
        vllm_chunk('{"content":null,"reasoning":" see"}'),
        vllm_content("Hi"),
        usage,
        b"data: [DONE]\n\n",
    ]
    s = feed(OpenAIDialect(CONFIG).parser(SPEC), frames)
    assert s.reasoning_events == 3 and s.reasoning_tokens == usage_reasoning
    return s.thinking_tokens()


def test_thinking_tokens_are_usages_unless_usage_says_fewer_than_streamed() -> None:
    """vLLM's deepseek_r1 parser reports 0 reasoning tokens when the chat template opened the
    thinking, though it streamed the thinking as reasoning: a count below the pieces is
    wrong (each is a token at least), so zqbench counts the pieces."""
    assert _thinking_then(5) == (5, True)  # more tokens than pieces: pieces may merge
    assert _thinking_then(3) == (3, True)
    assert _thinking_then(0) == (3, False)
    assert _thinking_then(None) == (3, False)


def test_redacted_thinking_is_recorded_as_such() -> None:
    body = (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":['
        b'{"type":"redacted_thinking","data":"EmwKAhgBEgy3"},{"type":"text","text":"Hi"}],'
        b'"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":9}}'
    )
    plain = RequestSpec("short", "hi", 20, stream=False)
    s = feed(AnthropicDialect(CONFIG).parser(plain), [body], headers=JSON_HEADERS)
    assert s.carried == THINKING | REDACTED | TEXT and s.t_first_answer == s.t_first_token == 1001
    assert s.token_events == 1 and s.output_tokens == 9


def test_a_body_that_only_thought_has_no_first_answer() -> None:
    body = (
        b'{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,'
        b'"message":{"role":"assistant","content":null,"reasoning":"hmm"},"finish_reason":"length"}],'
        b'"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6,'
        b'"completion_tokens_details":{"reasoning_tokens":3}}}'
    )
    plain = RequestSpec("short", "hi", 3, stream=False)
    s = feed(OpenAIDialect(CONFIG).parser(plain), [body], headers=JSON_HEADERS)
    assert s.carried == THINKING and s.t_first_token == 1001 and s.t_first_answer is None
    assert s.reasoning_tokens == 3 and s.token_events == 1


@pytest.mark.parametrize("dialect", [AnthropicDialect, OpenAIDialect])
@pytest.mark.parametrize(("choice", "named"), [("lookup", True), ("any", False)])
def test_a_request_offering_tools_is_answered_with_a_call_both_apis(
    server: Server, dialect: type, choice: str, named: bool
) -> None:
    """The dialects write the tools and tool_choice in each API's words; the reference
    server (which follows both) answers with a call whose every token is a tool event."""
    offered = (
        ToolDef("other", "not this one", {"type": "object", "properties": {}}),
        ToolDef("lookup", "look a word up", LOOKUP),
    )
    if not named:
        offered = offered[::-1]  # "any": the server calls the first
    spec = RequestSpec("tools", "hi", 20, tools=Tools(offered, choice, named))
    d = dialect(CONFIG)
    s = feed(d.parser(spec), sent(server, d, spec))
    assert s.error is None and s.carried == TOOL and s.tool_events == 20, d.build(spec).body
    assert s.tool_calls == 1
    assert s.t_first_answer == s.t_first_token


def test_tool_calls_are_counted_by_their_ids_and_blocks() -> None:
    """vLLM streams two calls (index 0 and 1), each opened by a piece with its id; a body
    lists them."""
    call = '{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"name":"f"}}]}'
    piece = '{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]}'
    frames = [
        vllm_chunk('{"role":"assistant","content":""}'),
        vllm_chunk(call % (0, 0)),
        vllm_chunk(piece % (0, "{}")),
        vllm_chunk(call % (1, 1)),
        vllm_chunk(piece % (1, "nu")),
        vllm_chunk(piece % (1, "ll")),
        vllm_chunk("{}", '"tool_calls"'),
        vllm_usage(9),
        b"data: [DONE]\n\n",
    ]
    s = feed(OpenAIDialect(CONFIG).parser(SPEC), frames)
    assert (s.tool_calls, s.tool_events, s.token_events, s.output_tokens) == (2, 3, 3, 9)
    assert s.t_first_token == s.t_first_answer == 1003
    body = (
        b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":['
        b'{"type":"tool_use","id":"t1","name":"f","input":{}},'
        b'{"type":"tool_use","id":"t2","name":"f","input":{"q":1}}],'
        b'"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":9}}'
    )
    plain = RequestSpec("short", "hi", 20, stream=False)
    s = feed(AnthropicDialect(CONFIG).parser(plain), [body], headers=JSON_HEADERS)
    assert s.tool_calls == 2 and s.carried == TOOL and s.t_first_answer == 1001


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_the_sdks_read_the_same_stream_as_zqbench(server: Server, api: str) -> None:
    """One stream of the reference server (thinking, then a named tool's call), read by the
    official SDK's accumulator and by zqbench's parser: the same thinking, the same call."""
    lookup = ToolDef("lookup", "look a word up", LOOKUP)
    spec = RequestSpec("sdk", "hi", 40, tools=Tools((lookup,), "auto"), thinking_budget=10)
    d = get_dialect(api, CONFIG)
    frames = sent(server, d, spec)
    s = feed(d.parser(spec), frames)
    thinking, calls, tokens = sdk_read(api, frames)
    # The reference model's thinking is one character a token, its call's arguments too.
    assert (s.reasoning_events, s.tool_calls, s.output_tokens) == (len(thinking), calls, tokens)
    assert s.reasoning_events == 10 and s.tool_events == 30 and calls == 1
