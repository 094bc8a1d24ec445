"""Repeated token events read from a template (dialects/parser.py `_repeat`, #43): whatever the
stream, the parse equals the slow one, event by event; and the shortcut is really taken."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zqbench.dialects import parser as parser_module
from zqbench.dialects.anthropic import AnthropicParser
from zqbench.dialects.openai import OpenAIParser


def _oai(delta: dict[str, Any], finish: str | None = None, created: int = 1, **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": created,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(chunk, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()


def _ant(kind: str, text: str) -> bytes:
    key = "text" if kind == "text_delta" else "thinking"
    obj = {"type": "content_block_delta", "index": 0, "delta": {"type": kind, key: text}}
    return f"event: content_block_delta\ndata: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


OAI_END = [_oai({}, "stop"), b"data: [DONE]\n\n"]
ANT_START = [
    b'event: message_start\ndata: {"type":"message_start",'
    b'"message":{"usage":{"input_tokens":3}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
]
ANT_END = [
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":9}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


def _parse(cls: type, pieces: list[bytes], templates: bool, monkeypatch: Any) -> dict[str, Any]:
    with monkeypatch.context() as m:
        if not templates:
            m.setattr(parser_module, "_learn", lambda *a: None)
        p = cls(True, keep_answer=True)
        p.on_headers(200, {}, 0)
        for i, piece in enumerate(pieces):
            p.on_data(piece, 1000 * (i + 1))
        p.on_end(10**9)
    s = dataclasses.asdict(p.summary)
    return {**s, "stop_reason": p.stop_reason}


def _count_feeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts SSEDecoder.feed calls (the slow path and the proofs) in its one item."""
    feeds = [0]
    real_feed = parser_module.SSEDecoder.feed

    def counting(self: Any, data: bytes) -> Any:
        feeds[0] += 1
        return real_feed(self, data)

    monkeypatch.setattr(parser_module.SSEDecoder, "feed", counting)
    return feeds


TEXTS = st.one_of(
    st.sampled_from(["a", " tok", "é", "日本", "🙂", "", '"', "\\", "a\\nb", "\n", "x\ty"]),
    st.text(max_size=6),
)


@given(st.lists(st.tuples(st.sampled_from(["content", "role", "reasoning", "usage"]), TEXTS)))
def test_openai_streams_parse_the_same_with_and_without_templates(
    steps: list[tuple[str, str]],
) -> None:
    pieces = []
    for kind, text in steps:
        if kind == "content":
            pieces.append(_oai({"content": text}))
        elif kind == "role":
            pieces.append(_oai({"role": "assistant", "content": text}))
        elif kind == "reasoning":
            pieces.append(_oai({"reasoning": text}))
        else:
            pieces.append(_oai({"content": text}, usage={"completion_tokens": 3}))
    pieces += OAI_END
    with pytest.MonkeyPatch.context() as m:
        assert _parse(OpenAIParser, pieces, True, m) == _parse(OpenAIParser, pieces, False, m)


@given(st.lists(st.tuples(st.sampled_from(["text_delta", "thinking_delta"]), TEXTS)))
def test_anthropic_streams_parse_the_same_with_and_without_templates(
    steps: list[tuple[str, str]],
) -> None:
    pieces = ANT_START + [_ant(kind, text) for kind, text in steps] + ANT_END
    with pytest.MonkeyPatch.context() as m:
        assert _parse(AnthropicParser, pieces, True, m) == _parse(AnthropicParser, pieces, False, m)


def test_a_stream_of_plain_tokens_is_read_from_the_template(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the first two chunks (the role chunk, then the first plain one, which teaches
    the template) no chunk is decoded as SSE: the shortcut is taken, with the same result."""
    pieces = [_oai({"role": "assistant", "content": "Hi"})]
    pieces += [_oai({"content": f" w{i}"}) for i in range(50)] + OAI_END
    feeds = _count_feeds(monkeypatch)
    fast = _parse(OpenAIParser, pieces, True, monkeypatch)
    assert feeds[0] == 2 + 2 + 2  # role, first plain; the two end pieces; the proof's probes
    assert fast == _parse(OpenAIParser, pieces, False, monkeypatch)
    assert "".join(fast["answer"]) == "Hi" + "".join(f" w{i}" for i in range(50))
    assert len(fast["token_times"]) == 51


def test_an_escaped_text_is_not_mistaken_for_another_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The text 'a' sent escaped (\\u0061) while the model's name is "a": the only quoted
    'a' in the piece is the model, and the proof refuses that template."""

    def chunk(escaped: str) -> bytes:
        return (
            b'data: {"model":"a","choices":[{"index":0,"delta":{"content":"'
            + escaped.encode()
            + b'"},"finish_reason":null}]}\n\n'
        )

    pieces = [chunk("\\u0061"), chunk("\\u0062"), chunk("\\u0063"), *OAI_END]
    fast = _parse(OpenAIParser, pieces, True, monkeypatch)
    assert "".join(fast["answer"]) == "abc"
    assert fast == _parse(OpenAIParser, pieces, False, monkeypatch)


def test_escaped_texts_are_read_from_the_template_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Code streams quotes and newlines: once a template is known, a JSON string body with
    escapes in its place is decoded as the slow path would, with no SSE or JSON object."""
    texts = [" x", ' "a"\n', " \\", " \u00e9\t", " y", "\U0001f642"]
    pieces = [_oai({"content": t}) for t in texts] + OAI_END
    feeds = _count_feeds(monkeypatch)
    fast = _parse(OpenAIParser, pieces, True, monkeypatch)
    assert feeds[0] == 1 + 1 + 2  # the first chunk, its proof; the two end pieces
    assert fast == _parse(OpenAIParser, pieces, False, monkeypatch)
    assert "".join(fast["answer"]) == "".join(texts)


def test_a_server_whose_chunks_all_differ_stops_the_learning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A counter in every chunk: each template is dropped unused, and after three the
    response learns no more (each proof costs a decode), with the same result."""
    pieces = [_oai({"content": f" t{i}"}, created=i) for i in range(40)] + OAI_END
    proofs = 0
    real = parser_module._proven

    def counting(*args: Any) -> bool:
        nonlocal proofs
        proofs += 1
        return real(*args)

    monkeypatch.setattr(parser_module, "_proven", counting)
    fast = _parse(OpenAIParser, pieces, True, monkeypatch)
    assert proofs == parser_module.MAX_UNUSED_TEMPLATES
    assert fast == _parse(OpenAIParser, pieces, False, monkeypatch)
