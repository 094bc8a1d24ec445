from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dialects.frames import (
    A_BODY,
    A_ERROR_BODY,
    A_EVENTS,
    A_STREAM,
    A_TEXT,
    JSON_HEADERS,
    a_frame,
    a_stream,
    feed,
    meaning,
    split_at,
)
from zqbench.dialects import AnthropicDialect
from zqbench.dialects.base import TEXT, DialectConfig, RequestSpec

SPEC = RequestSpec("short", "Say hi", 16)
NOSTREAM = RequestSpec("short", "Say hi", 16, stream=False)
CONFIG = DialectConfig(model="m", api_key="sk-ant-SECRET-123")


def parse(stream: bytes | list[bytes], spec=SPEC, **kw):
    pieces = [stream] if isinstance(stream, bytes) else stream
    return feed(AnthropicDialect(CONFIG).parser(spec), pieces, **kw)


# ------------------------------------------------------------------ build
def test_build_with_key():
    d = AnthropicDialect(
        DialectConfig(model="claude-x", api_key="k-1", extra_headers=(("x-extra", "1"),))
    )
    req = d.build(RequestSpec("c", 'say "hi" ☃\n', 64))
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.headers == (
        ("content-type", "application/json"),
        ("anthropic-version", "2023-06-01"),
        ("x-api-key", "k-1"),
        ("x-extra", "1"),
    )
    assert json.loads(req.body) == {
        "model": "claude-x",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": 'say "hi" ☃\n'}],
        "stream": True,
    }
    req.body.decode("ascii")  # non-ASCII is escaped: the body is plain ASCII


def test_build_without_key_and_not_streaming():
    d = AnthropicDialect(DialectConfig(model="m", anthropic_version="2026-10-21"))
    req = d.build(RequestSpec("c", "p", 8, stream=False))
    names = [k for k, _ in req.headers]
    assert "x-api-key" not in names and "authorization" not in names
    assert dict(req.headers)["anthropic-version"] == "2026-10-21"
    assert json.loads(req.body) == {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "p"}],
        "stream": False,
    }
    # The cached head is reused but not confused between max_tokens values.
    assert json.loads(d.build(RequestSpec("c", "q", 9)).body)["max_tokens"] == 9
    assert json.loads(d.build(RequestSpec("c", "q", 8)).body)["max_tokens"] == 8


# ------------------------------------------------------------------ streaming
def test_complete_stream():
    s = parse(A_STREAM)
    assert s.error is None
    assert s.status == 200 and s.t_headers == 1000
    assert s.prompt_tokens == 5
    assert s.output_tokens == 4 and s.tokens_from_usage
    assert s.text_chars == len(A_TEXT)
    assert s.token_times == [1001, 1001, 1001] and s.t_first_token == 1001
    assert s.srv_gpu_ms == 1.25
    # No timing headers: zq_timing fills them.
    assert (s.srv_received, s.srv_dispatch, s.srv_start) == (
        1764400000.0001,
        1764400000.0002,
        1764400000.0003,
    )


def test_token_time_is_the_piece_that_completed_the_event():
    # Byte i arrives at t = 1001 + i; a delta event is complete at its closing blank line.
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    s = feed(parser, [A_STREAM[i : i + 1] for i in range(len(A_STREAM))])
    want = []
    pos = 0
    while (pos := A_STREAM.find(b"event: content_block_delta", pos)) >= 0:
        end = A_STREAM.index(b"\n\n", pos) + 1  # the second "\n"
        want.append(1001 + end)
        pos = end
    assert s.token_times == want and s.t_first_token == want[0]
    assert parser.stop_reason == "max_tokens"


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_two_way_split_gives_the_same_summary(ending):
    stream = A_STREAM.replace(b"\n", ending)
    want = meaning(parse(A_STREAM))
    for cut in range(len(stream) + 1):
        assert meaning(parse(split_at(stream, [cut]))) == want, cut


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=len(A_STREAM)), max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_random_splits_give_the_same_summary(cuts, ending):
    stream = A_STREAM.replace(b"\n", ending)
    cuts = [min(c, len(stream)) for c in cuts]
    assert meaning(parse(split_at(stream, cuts))) == meaning(parse(A_STREAM))


def test_headers_win_over_zq_timing_and_bad_headers_are_ignored():
    headers = {
        "content-type": "text/event-stream",
        "x-request-received-time": "1764400001.000001",
        "x-request-dispatch-time": "garbage",
        "x-request-start-time": "nan",
    }
    s = parse(A_STREAM, headers=headers)
    assert s.error is None
    assert s.srv_received == 1764400001.000001
    # The malformed ones were ignored, so the body's stamps fill in.
    assert s.srv_dispatch == 1764400000.0002 and s.srv_start == 1764400000.0003


def test_multiline_data_and_no_event_lines():
    # JSON split over data lines is joined with "\n" (still JSON); frames without `event:`
    # are named by their JSON type.
    stream = (
        a_frame("message_start", A_EVENTS[0][1])
        + b'data: {"type":"content_block_delta","index":0,\n'
        + b'data:  "delta":{"type":"text_delta","text":"Hi"}}\n\n'
        + b'data: {"type":"message_delta","delta":{},"usage":{"output_tokens":1}}\n\n'
        + b'data: {"type":"message_stop"}\n\n'
    )
    s = parse(stream)
    assert s.error is None and s.text_chars == 2 and len(s.token_times) == 1
    assert s.output_tokens == 1


def test_pings_comments_and_unknown_events_are_ignored():
    extra = b": keepalive\n\nevent: brand_new_event\ndata: not even json\n\n"
    stream = extra + A_STREAM.replace(b"event: ping", b": c\nevent: ping")
    assert meaning(parse(stream)) == meaning(parse(A_STREAM))


def test_an_empty_text_delta_is_a_token_other_deltas_are_not():
    """A token that completes no character streams as text "": a token all the same. An
    empty tool-input piece and a thinking block's signature are none."""
    events = list(A_EVENTS)
    events.insert(
        3,
        (
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}',
        ),
    )
    for delta in (
        '{"type":"input_json_delta","partial_json":""}',
        '{"type":"signature_delta","signature":"c2ln"}',
    ):
        events.insert(
            3,
            ("content_block_delta", f'{{"type":"content_block_delta","index":1,"delta":{delta}}}'),
        )
    s = parse(a_stream(events))
    assert s.error is None and s.token_events == 4 and s.text_chars == len(A_TEXT)
    assert s.carried == TEXT and s.t_first_answer == s.t_first_token


@pytest.mark.parametrize(
    ("error_obj", "want"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, "stream_overloaded_error"),
        ({"type": "Weird Type!", "message": "x"}, "stream_error"),
        ("just a string", "stream_error"),
    ],
)
def test_mid_stream_error(error_obj, want):
    err = json.dumps({"type": "error", "error": error_obj})
    events = [*A_EVENTS[:4], ("error", err), *A_EVENTS[4:]]
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    s = feed(parser, [a_stream(events)])
    assert s.error == want
    assert len(s.token_times) == 1  # the chunk before the error, nothing after
    assert s.output_tokens == 1 and not s.tokens_from_usage  # estimated: 5 chars / 4


def test_every_truncation_is_incomplete_unless_message_stop_arrived():
    stop = b'{"type":"message_stop"}'
    complete_from = A_STREAM.index(stop) + len(stop)
    for cut in range(len(A_STREAM)):
        s = parse(A_STREAM[:cut])
        if cut >= complete_from:  # only the closing blank line is missing: accepted
            assert s.error is None, cut
        else:
            assert s.error == "incomplete_stream", cut


def test_truncated_stream_estimates_tokens():
    cut = A_STREAM.index(b"event: message_delta")
    s = parse(A_STREAM[:cut])
    assert s.error == "incomplete_stream"
    assert s.prompt_tokens == 5
    assert s.output_tokens == 4 and not s.tokens_from_usage  # 15 chars / 4, rounded
    assert len(s.token_times) == 3


def test_stream_without_usage_estimates():
    events = [(e, d.replace('"usage":{"output_tokens":4},', "")) for e, d in A_EVENTS]
    s = parse(a_stream(events))
    assert s.error is None and s.output_tokens == 4 and not s.tokens_from_usage


def test_a_message_stop_before_message_start_is_an_empty_stream():
    body = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    s = parse(body)
    assert (s.error, s.token_times) == ("empty_stream", [])


def test_non_json_data_is_bad_json():
    stream = a_stream(A_EVENTS[:3]) + a_frame("content_block_delta", "{not json") + A_STREAM
    assert parse(stream).error == "bad_json"
    stream = a_stream(A_EVENTS[:3]) + a_frame("content_block_delta", "[1, 2]")
    assert parse(stream).error == "bad_json"


def test_invalid_utf8_is_bad_sse_whatever_the_split():
    bad = A_STREAM.replace(b"w\xc3\xb6rld", b"w\xc3rld")
    want = meaning(parse(bad))
    assert want["error"] == "bad_sse" and want["n_chunks"] == 1
    for cut in range(len(bad) + 1):
        assert meaning(parse(split_at(bad, [cut]))) == want, cut


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(min_value=100, max_value=600))
def test_garbage_never_raises(pieces, status):
    s = parse(pieces, status=status)
    assert s.error is not None
    s = parse(pieces, spec=NOSTREAM, status=status)
    assert s.error is not None


def test_garbage_after_a_valid_prefix():
    s = parse([A_STREAM[:200], bytes(range(256)) * 4])
    assert s.error == "bad_sse"


def test_huge_event_is_bad_sse():
    huge = b"event: content_block_delta\ndata: " + b"x" * (9 * 1024 * 1024) + b"\n\n"
    pieces = [huge[i : i + 65536] for i in range(0, len(huge), 65536)]
    assert parse([A_STREAM[:300], *pieces]).error == "bad_sse"


def test_bytes_after_message_stop_are_ignored():
    s = parse(A_STREAM + b"\xff\xfe trailing garbage")
    assert s.error is None


def test_on_end_twice_is_harmless():
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    feed(parser, [A_STREAM])
    parser.on_end(5000)
    assert parser.summary.error is None


# ------------------------------------------------------------------ HTTP errors
@pytest.mark.parametrize(
    ("status", "headers", "retry"),
    [
        (429, {"retry-after": "2"}, 2.0),
        (529, {"retry-after": "0.5", "retry-after-ms": "1500"}, 1.5),
        (503, {"retry-after": "soon"}, None),
        (503, {}, None),
    ],
)
def test_http_errors(status, headers, retry):
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    s = feed(parser, [A_ERROR_BODY[:30], A_ERROR_BODY[30:]], status=status, headers=headers)
    assert s.error == f"http_{status}"
    assert s.retry_after_s == retry
    assert s.t_first_token is None and s.token_times == []
    assert s.output_tokens is None


def test_http_error_with_garbage_body():
    parser = AnthropicDialect(CONFIG).parser(SPEC)
    s = feed(parser, [b"<html>\xff bad gateway"], status=502, headers={})
    assert s.error == "http_502"


def test_refusal_keeps_received_time():
    headers = {"x-request-received-time": "1764400000.5", "retry-after": "1"}
    s = parse([A_ERROR_BODY], status=529, headers=headers)
    assert s.srv_received == 1764400000.5 and s.srv_dispatch is None and s.retry_after_s == 1.0


# ------------------------------------------------------------------ non-streaming
def test_non_streaming_body():
    parser = AnthropicDialect(CONFIG).parser(NOSTREAM)
    s = feed(parser, [A_BODY[:10], A_BODY[10:]], headers=JSON_HEADERS)
    assert s.error is None
    assert s.t_first_token == 1001  # TTFT of a non-streamed response: the first body byte
    assert s.token_times == [1001]
    assert s.text_chars == len("Hello, wörld")
    assert (s.prompt_tokens, s.output_tokens, s.tokens_from_usage) == (12, 34, True)
    assert s.srv_gpu_ms == 2.5
    assert parser.stop_reason == "end_turn"


def test_non_streaming_without_usage_estimates():
    body = json.dumps({"content": [{"type": "text", "text": "abcdefghij"}]}).encode()
    s = parse(body, spec=NOSTREAM)
    assert s.error is None and s.output_tokens == 3 and not s.tokens_from_usage


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"not json", "bad_json"),
        (b"[1,2]", "bad_json"),
        (b'{"type":"message"}', "bad_json"),
        (b"\xff\xfe", "bad_json"),
        (b'{"id":"x", "content":[{"type":"text","text":"a"}]', "bad_json"),
        # a 200 whose body is an overload error, no text: a refusal in disguise
        (A_ERROR_BODY, "refused_in_stream"),
    ],
)
def test_non_streaming_bad_bodies(body, want):
    assert parse(body, spec=NOSTREAM).error == want


def test_non_streaming_body_over_the_cap():
    parser = AnthropicDialect(CONFIG, max_body_bytes=1000).parser(NOSTREAM)
    s = feed(parser, [b"x" * 600, b"y" * 600, b"z" * 600])
    assert s.error == "too_large"
    assert parser._body == []  # nothing kept


def test_non_streaming_huge_body_under_default_cap():
    text = "ab" * (4 * 1024 * 1024)
    body = json.dumps({"content": [{"type": "text", "text": text}], "usage": {}}).encode()
    pieces = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    s = parse(pieces, spec=NOSTREAM)
    assert s.error is None and s.text_chars == len(text)
    assert s.output_tokens == len(text) // 4 and not s.tokens_from_usage
