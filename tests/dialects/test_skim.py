"""Large JSON is read as it arrives, long strings measured, not kept (`zqbench.dialects.skim`).

Two promises: the meaning is exactly what `json.loads` of the whole text gives (a long
string read as its length), and nothing large is kept: no piece costs more than its own
size, and memory stays small whatever the response's size.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from tests.dialects.frames import JSON_HEADERS, feed, meaning, split_at
from zqbench.dialects import AnthropicDialect, OpenAIDialect
from zqbench.dialects.base import DialectConfig, RequestSpec
from zqbench.dialects.skim import SKIM_AFTER, JsonSkim, SkimTooLarge

CONFIG = DialectConfig(model="m")
STREAM = RequestSpec("c", "p", 16)
NOSTREAM = RequestSpec("c", "p", 16, stream=False)
SLICE = 16 * 1024
ALPHABET = ["a", " ", '"', "\\", "\n", "\t", "é", "😀", "\u2028", "\x01", "/", "u", "{", "]"]


def _shape(value: Any, chars: Callable[[str], int]) -> Any:
    """A JSON value with every string replaced by its length, as `chars` measures it."""
    if isinstance(value, str):
        return ("str", chars(value))
    if isinstance(value, list):
        return [_shape(v, chars) for v in value]
    if isinstance(value, dict):
        return [(chars(k), _shape(v, chars)) for k, v in value.items()]
    return value


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.choice([0, 1, 5, 30, 200])))
    if roll < 0.4:
        return rng.choice([1, -2.5e3, True, False, None, 0])
    if roll < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(4))
    return {k: _random_value(rng, depth + 1) for k in keys}


def _skim(text: str, cuts: list[int], long_chars: int) -> tuple[Any, Any]:
    skim = JsonSkim(max_kept=1 << 30, long_chars=long_chars)
    for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True):
        skim.feed(text[a:b])
    return skim.finish()


def test_skim_means_what_json_loads_means_whatever_the_split() -> None:
    rng = random.Random(11)
    for _ in range(1500):
        text = json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5)
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text), rng.randint(0, 8))))
        value, strings = _skim(text, cuts, rng.choice([0, 1, 3, 10, 25]))
        assert _shape(value, strings.chars) == _shape(json.loads(text), len), (text, cuts)


@pytest.mark.parametrize(
    "content",
    [
        "😀" * 40,  # surrogate pairs (ensure_ascii) cut at every point
        '\\"' * 30 + '"' * 20,  # escaped quotes: more than the fast path looks at
        "\\" * 41 + "x",  # backslash runs
        "a\u2028\x1fé" * 20,
    ],
)
def test_long_strings_are_measured_exactly_at_every_cut(content: str) -> None:
    text = json.dumps({"s": content, "t": [content]})
    expected = _shape(json.loads(text), len)
    for cut in range(len(text) + 1):
        value, strings = _skim(text, [cut], 4)
        assert _shape(value, strings.chars) == expected, cut
    assert len(strings) == 2  # both long strings were measured, not kept


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "\x01' + "x" * 50 + '"}',  # a raw control character inside a long string
        '{"a": "' + "x" * 50 + '\\x"}',  # a bad escape
        '{"a": "' + "x" * 50 + '\\u12g4"}',
        '{"a": "' + "x" * 50,  # cut inside a string
        '{"a" "b"}',
        "[1,]",
        "bbbb",
    ],
)
def test_skim_rejects_what_json_loads_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    for pieces in ([text], list(text)):
        skim = JsonSkim(max_kept=1 << 20, long_chars=8)
        with pytest.raises(ValueError):
            for piece in pieces:
                skim.feed(piece)
            skim.finish()


def test_text_that_is_not_json_fails_at_its_first_piece() -> None:
    skim = JsonSkim(max_kept=1 << 20)
    with pytest.raises(ValueError):
        skim.feed("b" * 1000)
    skim.feed("{}")  # ignored from then on
    with pytest.raises(ValueError):
        skim.finish()


def test_only_the_skeleton_counts_against_the_cap() -> None:
    skim = JsonSkim(max_kept=100, long_chars=10)
    skim.feed(json.dumps({"text": "x" * 100_000}))
    value, strings = skim.finish()
    assert strings.chars(value["text"]) == 100_000
    with pytest.raises(SkimTooLarge):
        JsonSkim(max_kept=100, long_chars=10).feed(json.dumps(list(range(100))))


# ------------------------------------------------------------------ the parsers
def _peak_while(parse: Callable[[], Any]) -> tuple[Any, int]:
    """What `parse` returns, and the peak of the memory it allocated meanwhile."""
    tracemalloc.start()
    try:
        result = parse()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _slices(data: bytes) -> list[bytes]:
    return split_at(data, range(SLICE, len(data), SLICE))


def test_a_large_body_is_read_as_it_arrives_and_not_kept() -> None:
    size = 3_000_000
    body = json.dumps(
        {
            "id": "c",
            "choices": [{"message": {"content": "é" * size}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 7},
            "zq_timing": {"gpu_ms": 2.5},
        },
        ensure_ascii=False,
    ).encode()
    dialect = OpenAIDialect(CONFIG, max_body_bytes=1 << 20)  # smaller than the body
    pieces = _slices(body)
    summary, peak = _peak_while(
        lambda: feed(dialect.parser(NOSTREAM), pieces, headers=JSON_HEADERS)
    )
    assert summary.error is None
    assert summary.text_chars == size and summary.output_tokens == 7
    assert summary.token_events == 1 and summary.srv_gpu_ms == 2.5
    assert peak < 1_000_000  # the 6 MB body was never kept


def test_a_large_anthropic_body_counts_every_text_block() -> None:
    body = json.dumps(
        {
            "type": "message",
            "content": [
                {"type": "text", "text": "a" * 200_000},
                {"type": "tool_use", "input": {"x": "b" * 100_000}},
                {"type": "text", "text": "c"},
            ],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 1, "output_tokens": 9},
        }
    ).encode()
    parser = AnthropicDialect(CONFIG).parser(NOSTREAM)
    summary = feed(parser, _slices(body), headers=JSON_HEADERS)
    assert summary.error is None and summary.text_chars == 200_001
    assert parser.stop_reason == "max_tokens" and summary.output_tokens == 9


def test_a_large_body_that_is_not_json_is_bad_json_at_once() -> None:
    parser = OpenAIDialect(CONFIG).parser(NOSTREAM)
    parser.on_headers(200, JSON_HEADERS, 1)
    parser.on_data(b"b" * (SKIM_AFTER + 1), 2)
    assert parser.summary.error == "bad_json"


def test_a_body_whose_skeleton_passes_the_cap_is_too_large() -> None:
    body = json.dumps({"choices": [], "logprobs": list(range(100_000))}).encode()
    summary = feed(
        OpenAIDialect(CONFIG, max_body_bytes=SKIM_AFTER * 2).parser(NOSTREAM),
        _slices(body),
        headers=JSON_HEADERS,
    )
    assert summary.error == "too_large"


def _chunk(text: str) -> bytes:
    obj = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _openai_stream(texts: list[str]) -> bytes:
    usage = {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": len(texts)}}
    return (
        b"".join(_chunk(t) for t in texts)
        + b"data: "
        + json.dumps(usage).encode()
        + b"\n\ndata: [DONE]\n\n"
    )


def test_large_events_are_read_as_they_arrive_and_not_kept() -> None:
    stream = _openai_stream(["x" * 1_000_000, "y", "z" * 2_000_000])
    pieces = _slices(stream)
    summary, peak = _peak_while(lambda: feed(OpenAIDialect(CONFIG).parser(STREAM), pieces))
    assert summary.error is None and summary.tokens_from_usage
    assert summary.text_chars == 3_000_001 and summary.token_events == 3
    assert peak < 1_000_000


def test_skimmed_events_mean_what_whole_events_mean() -> None:
    """An event hook sees every event whole (no skim): both parsers read the same."""
    rng = random.Random(5)
    sizes = [0, 1, SKIM_AFTER - 40, SKIM_AFTER + 1, 3 * SKIM_AFTER, 200_000]
    texts = ["".join(rng.choice('ab"\\é\n😀') for _ in range(n)) for n in sizes]
    stream = _openai_stream(texts)
    hooked: list[str] = []
    slices = list(range(SLICE, len(stream), SLICE))
    for cuts in ([], slices, sorted(rng.sample(range(len(stream)), 50))):
        pieces = split_at(stream, cuts)
        plain = feed(OpenAIDialect(CONFIG).parser(STREAM), pieces)
        whole = feed(
            OpenAIDialect(CONFIG).parser(STREAM, on_event=lambda e, t: hooked.append(e.data)),
            pieces,
        )
        assert meaning(plain) == meaning(whole)
        assert plain.text_chars == sum(len(t) for t in texts)
    assert any(len(d) > 3 * SKIM_AFTER for d in hooked)  # the hook's events were whole


@pytest.mark.parametrize(
    ("tail", "error"),
    [
        (b'data: {"choices": [{"delta": {"content": "' + b"x" * 200_000 + b"}\n\n", "bad_json"),
        (b'data: {"choices": [{"delta": {"content": "' + b"x" * 200_000, "incomplete_stream"),
    ],
)
def test_a_broken_large_event_keeps_its_error_class(tail: bytes, error: str) -> None:
    stream = _chunk("hello") + tail
    summary = feed(OpenAIDialect(CONFIG).parser(STREAM), _slices(stream))
    assert summary.error == error and summary.token_events == 1


def test_a_run_of_short_strings_is_kept_in_one_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """#25 item 10: an event of many small strings (a deep object, logprobs) took a few
    Python calls per string, 140 ms for 600 KB on the event loop. A run of them is now one
    C-level regex scan: the per-string path runs only at the pieces' cuts."""
    calls = 0
    close = JsonSkim._close_string

    def counted(self: JsonSkim) -> None:
        nonlocal calls
        calls += 1
        close(self)

    monkeypatch.setattr(JsonSkim, "_close_string", counted)
    text = '{"lp":[' + '"ab",' * 50_000 + '"ab"], "deep": ' + '{"a":' * 500 + "1" + "}" * 501
    pieces = [text[i : i + 16384] for i in range(0, len(text), 16384)]
    skim = JsonSkim(max_kept=len(text))
    for piece in pieces:
        skim.feed(piece)
    value, _ = skim.finish()
    assert value == json.loads(text)
    assert calls <= len(pieces)  # at most the strings cut between two pieces
