"""What the dialects tell other code besides a summary: every SSE event (the hook that
`zqbench conform` judges event order with), bad SSE, their API's facts and error objects."""

from __future__ import annotations

import json

import pytest

from tests.dialects.frames import (
    A_ERROR_BODY,
    A_EVENTS,
    A_STREAM,
    O_ERROR_BODY,
    O_STREAM,
    a_frame,
    feed,
    meaning,
)
from zqbench.dialects import DIALECTS, get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec, ResponseSummary, StreamParser
from zqbench.dialects.common import reported_in_stream

SPEC = RequestSpec("c", "p", 16)
CONFIG = DialectConfig(model="m")


def _parse_with_hook(
    api: str, pieces: list[bytes]
) -> tuple[StreamParser, ResponseSummary, list[tuple[str, int]]]:
    seen: list[tuple[str, int]] = []
    parser = get_dialect(api, CONFIG).parser(SPEC, on_event=lambda e, t: seen.append((e.event, t)))
    summary = feed(parser, pieces)
    return parser, summary, seen


@pytest.mark.parametrize(("api", "stream"), [("anthropic", A_STREAM), ("openai", O_STREAM)])
def test_the_hook_sees_every_event_and_changes_nothing(api: str, stream: bytes) -> None:
    half = len(stream) // 2
    _, summary, seen = _parse_with_hook(api, [stream[:half], stream[half:]])
    plain = feed(get_dialect(api, CONFIG).parser(SPEC), [stream[:half], stream[half:]])
    assert meaning(summary) == meaning(plain)
    assert summary.token_times == plain.token_times
    assert len(seen) == stream.count(b"\n\n")
    assert [t for _, t in seen] == sorted(t for _, t in seen)  # stamped as each piece came


def test_the_hook_still_sees_events_after_the_end_marker() -> None:
    """The parser stops reading at message_stop; conformance must see what came after."""
    late = a_frame("message_delta", '{"type":"message_delta","delta":{"stop_reason":"x"}}')
    parser, summary, seen = _parse_with_hook("anthropic", [A_STREAM, late])
    assert [name for name, _ in seen][-2:] == ["message_stop", "message_delta"]
    assert parser.stop_reason == "max_tokens" and summary.error is None
    assert len(seen) == len(A_EVENTS) + 1


def test_sse_error_says_the_stream_was_not_valid_sse() -> None:
    parser, summary, _ = _parse_with_hook("anthropic", [A_STREAM[:40], b"\xff\xfe", A_STREAM[40:]])
    assert parser.sse_error == "bad_sse" and summary.error == "bad_sse"
    ok, _, _ = _parse_with_hook("anthropic", [A_STREAM])
    assert ok.sse_error is None


def test_errors_reported_in_a_2xx_stream_are_told_apart() -> None:
    error = a_frame("error", '{"type":"error","error":{"type":"overloaded_error","message":"x"}}')
    _, summary, _ = _parse_with_hook("anthropic", [error])
    assert summary.error == "refused_in_stream" and reported_in_stream(summary.error)
    broken = a_frame("error", '{"type":"error","error":{"type":"api_error","message":"x"}}')
    _, summary, _ = _parse_with_hook("anthropic", [broken])
    assert summary.error == "stream_api_error" and reported_in_stream(summary.error)
    for other in (None, "http_503", "incomplete_stream", "bad_json"):
        assert not reported_in_stream(other)


@pytest.mark.parametrize("api", DIALECTS)
def test_error_objects_of_each_api(api: str) -> None:
    dialect = get_dialect(api, CONFIG)
    own = json.loads(A_ERROR_BODY if api == "anthropic" else O_ERROR_BODY)
    assert dialect.error_problem(own) is None
    assert dialect.error_problem([1]) == "the body is not a JSON object"
    assert dialect.error_problem({"error": "full"}) == "no `error` object"
    assert dialect.error_problem({"error": {"type": "x"}}) == "error.message is not a string"
    assert dialect.error_problem({"error": {"message": "m"}}) == "error.type is not a string"


def test_anthropic_errors_also_say_their_type_at_the_top() -> None:
    openai_shaped = json.loads(O_ERROR_BODY)
    assert get_dialect("openai", CONFIG).error_problem(openai_shaped) is None
    problem = get_dialect("anthropic", CONFIG).error_problem(openai_shaped)
    assert problem == 'top-level "type" is not "error"'


def test_each_dialect_names_its_api_facts() -> None:
    a, o = (get_dialect(name, CONFIG) for name in ("anthropic", "openai"))
    assert (a.path, o.path) == ("/v1/messages", "/v1/chat/completions")
    assert (a.stop_field, a.stop_at_max_tokens) == ("stop_reason", "max_tokens")
    assert (o.stop_field, o.stop_at_max_tokens) == ("finish_reason", "length")
    assert a.required_fields == ("model", "messages", "max_tokens")
    assert o.required_fields == ("model", "messages")
    assert (a.count_tokens_path, o.count_tokens_path) == ("/v1/messages/count_tokens", None)
    for d in (a, o):
        body = json.loads(d.build(SPEC).body)
        assert set(d.required_fields) <= set(body)
        assert d.build(SPEC).path == d.path
