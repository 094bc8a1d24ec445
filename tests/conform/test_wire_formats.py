"""api.*.6 and .7 judge the wire formats of a tool call and of thinking (#42 item 4).

Each stream here is a well-formed one with one thing broken, judged as conform judges it
(nothing is sent): the check fails naming that thing in one line, and the stream is the
evidence. A call cut at max_tokens before its arguments closed is inconclusive (a skip),
and so is an answer without thinking: the target does not think.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conform.util import recorded
from zqbench.conform.checks.api import thinking, tool_call
from zqbench.conform.context import Target
from zqbench.conform.model import CheckResult
from zqbench.conform.observations import Observations
from zqbench.conform.options import ConformOptions

ARGS = '{"query": "aaaa"}'


def a_stream(blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]], stop: str) -> list[bytes]:
    """A Messages stream of `blocks` (each its start and its deltas), then `stop`."""

    def frame(obj: dict[str, Any]) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()

    message = {"role": "assistant", "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}
    out = [frame({"type": "message_start", "message": message})]
    for i, (start, deltas) in enumerate(blocks):
        out.append(frame({"type": "content_block_start", "index": i, "content_block": start}))
        for d in deltas:
            out.append(frame({"type": "content_block_delta", "index": i, "delta": d}))
        out.append(frame({"type": "content_block_stop", "index": i}))
    delta = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}
    return [*out, frame(delta), frame({"type": "message_stop"})]


def tool_use(
    pieces: str = ARGS, name: str = "lookup", stop: str = "tool_use", **start: Any
) -> list[bytes]:
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}, **start}
    deltas = [{"type": "input_json_delta", "partial_json": c} for c in pieces]
    return a_stream([(block, deltas)], stop)


def o_stream(deltas: list[dict[str, Any]], finish: str, usage: dict[str, Any]) -> list[bytes]:
    """A chat-completions stream of `deltas`, then `finish`, the usage chunk, [DONE]."""

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        obj = {"id": "c", "object": "chat.completion.chunk", "created": 1, "choices": [choice]}
        return f"data: {json.dumps(obj)}\n\n".encode()

    usage = {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12, **usage}
    tail = {"id": "c", "object": "chat.completion.chunk", "created": 1, "choices": []}
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk(d) for d in deltas),
        chunk({}, finish),
        f"data: {json.dumps({**tail, 'usage': usage})}\n\n".encode(),
        b"data: [DONE]\n\n",
    ]


def o_call(pieces: str = ARGS, finish: str = "tool_calls", **first: Any) -> list[bytes]:
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup"}}
    head |= first
    rest = [{"tool_calls": [{"index": 0, "function": {"arguments": c}}]} for c in pieces]
    return o_stream([{"tool_calls": [head]}, *rest], finish, {})


def judged(api: str, phase: str, frames: list[bytes]) -> CheckResult:
    """The check of `phase` (tool, thinking) on observations whose exchange is `frames`."""
    target = Target(ConformOptions(target="http://127.0.0.1:9", apis=(api,)))
    obs = Observations(target, {f"api.{api}.{phase}": [(api, recorded(api, frames))]})
    return (tool_call if phase == "tool" else thinking)(obs, api)


@pytest.mark.parametrize(
    ("api", "frames", "reason"),
    [
        ("anthropic", tool_use(), "a call of 'lookup', its arguments a JSON object (tool_use)"),
        # A call with no input streams no piece: its input is the {} its block opened with.
        ("anthropic", tool_use(""), "a call of 'lookup', its arguments a JSON object (tool_use)"),
        ("openai", o_call(), "a call of 'lookup', its arguments a JSON object (tool_calls)"),
        # OpenAI's own API, and vLLM after it, end a named tool_choice's call with "stop".
        ("openai", o_call(finish="stop"), "a call of 'lookup', its arguments a JSON object (stop)"),
    ],
)
def test_a_well_formed_call_passes(api: str, frames: list[bytes], reason: str) -> None:
    result = judged(api, "tool", frames)
    assert (result.status, result.reason) == ("pass", reason)
    assert result.evidence["stream"] == b"".join(frames).decode()


@pytest.mark.parametrize(
    ("api", "frames", "reason"),
    [
        # vLLM 0.32's Messages route: the random model's pieces, unconstrained.
        ("anthropic", tool_use("1499e"),
         "tool_use block 0: the arguments '1499e' are not a JSON object"),
        ("anthropic", tool_use(name="search"),
         "event 1 (content_block_start) name: 'search', the request named 'lookup'"),
        ("anthropic", tool_use(input={"query": "a"}),
         "event 1 (content_block_start) input: {'query': 'a'}, not {} (the input streams)"),
        ("anthropic", tool_use(stop="end_turn"),
         "stop_reason 'end_turn' after a call, expected 'tool_use' ('max_tokens': cut)"),
        ("anthropic", a_stream([({"type": "text", "text": ""},
                                 [{"type": "text_delta", "text": "hi"}])], "end_turn"),
         "no tool_use block: the named tool was not called (stop_reason 'end_turn')"),
        ("anthropic", a_stream([({"type": "tool_use", "id": "t", "name": "lookup", "input": {}},
                                 [{"type": "text_delta", "text": "{}"}])], "tool_use"),
         "event 2 (content_block_delta): not an input_json_delta with a string partial_json"),
        # Cut: arguments that never open an object can never become one.
        ("anthropic", tool_use("null", stop="max_tokens"),
         "tool_use block 0: the arguments 'null' are not a JSON object"),
        ("openai", o_call("null"), "tool call 0: the arguments 'null' are not a JSON object"),
        ("openai", o_call(id=None), "event 1 tool_calls[0].id: not a non-empty string"),
        ("openai", o_call(type="tool"), "event 1 tool_calls[0].type: 'tool' is not 'function'"),
        ("openai", o_call(function={"name": "search"}),
         "event 1 tool_calls[0].function.name: 'search', the request named 'lookup'"),
        ("openai", o_call(finish="content_filter"),
         "finish_reason 'content_filter' after a call, expected 'tool_calls' or 'stop'"),
        ("openai", o_stream([{"content": "hi"}], "stop", {}),
         "no delta.tool_calls: the named tool was not called (finish_reason 'stop')"),
    ],
)  # fmt: skip
def test_a_malformed_call_fails_saying_what(api: str, frames: list[bytes], reason: str) -> None:
    result = judged(api, "tool", frames)
    assert (result.status, result.reason) == ("fail", reason)
    assert result.evidence["stream"] == b"".join(frames).decode()


@pytest.mark.parametrize(
    ("api", "frames"),
    [("anthropic", tool_use('{"query": "aa', stop="max_tokens")),
     ("openai", o_call('{"query": "aa', finish="length"))],
)  # fmt: skip
def test_a_call_cut_at_max_tokens_before_it_closed_is_inconclusive(
    api: str, frames: list[bytes]
) -> None:
    result = judged(api, "tool", frames)
    assert result.status == "skip"
    assert result.reason == (
        "the call was cut at max_tokens before its arguments closed (13 characters): inconclusive"
    )


THOUGHT = [{"type": "thinking_delta", "thinking": "a"}] * 3
SIGNED = [*THOUGHT, {"type": "signature_delta", "signature": "c2ln"}]
THINKING = {"type": "thinking", "thinking": "", "signature": ""}
TEXT = ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "b"}])
REASONING = [{"reasoning": "a"}] * 3
REDACTED = {"type": "redacted_thinking", "data": "x"}
LAST = {"reasoning_content": "a"}


def a_thought(deltas: list[dict[str, Any]] = SIGNED) -> list[bytes]:
    return a_stream([(THINKING, deltas), TEXT], "end_turn")


@pytest.mark.parametrize(
    ("api", "frames"),
    [
        ("anthropic", a_thought()),
        ("anthropic", a_stream([(REDACTED, []), TEXT], "end_turn")),
        ("openai", o_stream([*REASONING, {"content": "b"}], "stop",
                            {"completion_tokens_details": {"reasoning_tokens": 3}})),
        # SGLang's and DeepSeek's name; vLLM may send the last piece beside the first content.
        ("openai", o_stream([{"reasoning_content": "a"}, {**LAST, "content": "b"}],
                            "stop", {})),
    ],
)  # fmt: skip
def test_thinking_in_the_apis_format_passes(api: str, frames: list[bytes]) -> None:
    result = judged(api, "thinking", frames)
    assert result.status == "pass", result.reason


@pytest.mark.parametrize(
    ("api", "frames", "reason"),
    [
        ("anthropic", a_thought(THOUGHT),
         "event 5 (content_block_stop): the thinking block (event 1 (content_block_start)) "
         "ended without a signature_delta"),
        ("anthropic", a_thought([*SIGNED, *THOUGHT[:1]]),
         "event 6 (content_block_delta): a thinking_delta after the block's signature_delta"),
        ("anthropic", a_thought([*SIGNED, SIGNED[-1]]),
         "event 6 (content_block_delta): a second signature_delta in one thinking block"),
        ("anthropic", a_thought([{"type": "thinking_delta", "thinking": 7}, SIGNED[-1]]),
         "event 2 (content_block_delta) thinking: not a string"),
        ("anthropic", a_thought([{"type": "text_delta", "text": "a"}, SIGNED[-1]]),
         "event 2 (content_block_delta): a 'text_delta' delta in a thinking block"),
        ("anthropic", a_stream([TEXT, (THINKING, SIGNED)], "end_turn"),
         "event 4 (content_block_start): a thinking block after the answer began "
         "(event 1 (content_block_start))"),
        ("openai", o_stream([REASONING[0], {"content": "b"}, REASONING[0]], "stop", {}),
         "event 3: a reasoning piece after the answer began (event 2)"),
        ("openai", o_stream(REASONING, "length",
                            {"completion_tokens_details": {"reasoning_tokens": 2}}),
         "usage says 2 reasoning_tokens for 3 reasoning pieces"),
        ("openai", o_stream(REASONING, "length",
                            {"completion_tokens_details": {"reasoning_tokens": 10}}),
         "reasoning_tokens 10 exceed completion_tokens 9"),
        ("openai", o_stream([{"reasoning": ["a"]}], "stop", {}),
         "event 1: delta.reasoning is not a string"),
    ],
)  # fmt: skip
def test_malformed_thinking_fails_saying_what(api: str, frames: list[bytes], reason: str) -> None:
    result = judged(api, "thinking", frames)
    assert (result.status, result.reason) == ("fail", reason)


@pytest.mark.parametrize(
    ("api", "frames", "reason"),
    [
        ("anthropic", a_stream([TEXT], "end_turn"),
         "the answer carries no thinking block: the target does not think, or not when asked "
         "with the thinking object"),
        ("openai", o_stream([{"content": "b"}], "stop", {}),
         "the answer carries no reasoning piece: the target does not reason, or not asked so"),
        # OpenAI's o-series: reasoning counted, none of it streamed.
        ("openai", o_stream([{"content": "b"}], "stop",
                            {"completion_tokens_details": {"reasoning_tokens": 5}}),
         "usage reports 5 reasoning_tokens but no piece was streamed (hidden)"),
    ],
)  # fmt: skip
def test_a_target_that_does_not_think_skips(api: str, frames: list[bytes], reason: str) -> None:
    result = judged(api, "thinking", frames)
    assert (result.status, result.reason) == ("skip", reason)


@pytest.mark.parametrize(
    ("phase", "message", "reason"),
    [
        # vLLM's Messages route refuses a budget under 1,024, as Anthropic's API does.
        ("thinking", "budget\\nlow", "the request for thinking got status 400 (budget\\x0alow)"),
        # vLLM launched without a tool parser.
        ("tool", "requires --tool-call-parser",
         "the request for a named tool's call got status 400 (requires --tool-call-parser)"),
    ],
)  # fmt: skip
def test_a_request_the_target_does_not_serve_is_not_applicable(
    phase: str, message: str, reason: str
) -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "MSG"}}
    body = json.dumps(error).replace("MSG", message).encode()
    target = Target(ConformOptions(target="http://127.0.0.1:9", apis=("anthropic",)))
    ex = recorded("anthropic", [body], status=400)
    ex.headers = {"content-type": "application/json"}
    check = tool_call if phase == "tool" else thinking
    result = check(Observations(target, {f"api.anthropic.{phase}": [("a", ex)]}), "anthropic")
    assert (result.status, result.reason) == ("skip", f"not applicable: {reason}")
    assert result.evidence["response"]["status"] == 400
