from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dialects.frames import (
    JSON_HEADERS,
    O_BODY,
    O_CHUNKS,
    O_ERROR_BODY,
    O_STREAM,
    feed,
    meaning,
    o_stream,
    split_at,
)
from zqbench.dialects import OpenAIDialect
from zqbench.dialects.base import DialectConfig, RequestSpec

SPEC = RequestSpec("short", "Say hi", 16)
NOSTREAM = RequestSpec("short", "Say hi", 16, stream=False)
CONFIG = DialectConfig(model="m", api_key="sk-SECRET-123")


def parse(stream: bytes | list[bytes], spec=SPEC, config=CONFIG, **kw):
    pieces = [stream] if isinstance(stream, bytes) else stream
    return feed(OpenAIDialect(config).parser(spec), pieces, **kw)


# ------------------------------------------------------------------ build
def test_build_with_key_and_usage():
    d = OpenAIDialect(DialectConfig(model="gpt-x", api_key="k-1", extra_headers=(("x-e", "1"),)))
    req = d.build(RequestSpec("c", 'say "hi" ☃', 32))
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers == (
        ("content-type", "application/json"),
        ("authorization", "Bearer k-1"),
        ("x-e", "1"),
    )
    assert json.loads(req.body) == {
        "model": "gpt-x",
        "messages": [{"role": "user", "content": 'say "hi" ☃'}],
        "max_tokens": 32,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_build_without_key_without_usage_and_not_streaming():
    d = OpenAIDialect(DialectConfig(model="m", include_usage=False))
    req = d.build(RequestSpec("c", "p", 8))
    assert [k for k, _ in req.headers] == ["content-type"]
    body = json.loads(req.body)
    assert body["stream"] is True and "stream_options" not in body
    body = json.loads(d.build(RequestSpec("c", "p", 8, stream=False)).body)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "p"}],
        "max_tokens": 8,
        "stream": False,
    }
    with_usage = OpenAIDialect(DialectConfig(model="m"))
    body = json.loads(with_usage.build(RequestSpec("c", "p", 8, stream=False)).body)
    assert "stream_options" not in body


# ------------------------------------------------------------------ streaming
def test_complete_stream():
    parser = OpenAIDialect(CONFIG).parser(SPEC)
    s = feed(parser, [O_STREAM])
    assert s.error is None and s.status == 200
    assert len(s.token_times) == 3 and s.t_first_token == 1001  # the empty first delta is no token
    assert s.text_chars == len("Hello, wörld ☃!")
    assert (s.prompt_tokens, s.output_tokens, s.tokens_from_usage) == (5, 3, True)
    assert s.srv_gpu_ms == 0.75 and s.srv_start == 1764400000.0003
    assert parser.stop_reason == "length"


def test_token_time_is_the_piece_that_completed_the_chunk():
    s = parse([O_STREAM[i : i + 1] for i in range(len(O_STREAM))])
    ends = []
    pos = 0
    while (pos := O_STREAM.find(b"\n\n", pos)) >= 0:
        ends.append(1001 + pos + 1)
        pos += 2
    assert s.token_times == ends[1:4]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_two_way_split_gives_the_same_summary(ending):
    stream = O_STREAM.replace(b"\n", ending)
    want = meaning(parse(O_STREAM))
    for cut in range(len(stream) + 1):
        assert meaning(parse(split_at(stream, [cut]))) == want, cut


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=len(O_STREAM)), max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_random_splits_give_the_same_summary(cuts, ending):
    stream = O_STREAM.replace(b"\n", ending)
    cuts = [min(c, len(stream)) for c in cuts]
    assert meaning(parse(split_at(stream, cuts))) == meaning(parse(O_STREAM))


def test_without_usage_chunk_estimates():
    s = parse(o_stream([*O_CHUNKS[:4], "[DONE]"]))
    assert s.error is None and s.output_tokens == 4 and not s.tokens_from_usage
    assert s.prompt_tokens is None and s.srv_gpu_ms is None


def test_comments_and_other_named_events_are_ignored():
    stream = b": ping\n\nevent: vendor_stats\ndata: {}\n\n" + O_STREAM
    assert meaning(parse(stream)) == meaning(parse(O_STREAM))


def test_done_ends_the_stream():
    s = parse(O_STREAM + b"data: garbage after done\n\n")
    assert s.error is None


@pytest.mark.parametrize(
    ("chunk", "want"),
    [
        ('{"error":{"message":"boom","type":"server_error","code":null}}', "stream_server_error"),
        ('{"error":"boom"}', "stream_error"),
        ('{"object":"error","message":"m","type":"BadRequestError","code":400}', "stream_error"),
    ],
)
def test_mid_stream_error(chunk, want):
    s = parse(o_stream([*O_CHUNKS[:2], chunk, *O_CHUNKS[2:]]))
    assert s.error == want
    assert len(s.token_times) == 1


def test_event_error_frame():
    stream = o_stream(O_CHUNKS[:2]) + b'event: error\ndata: {"message":"x"}\n\n' + O_STREAM
    assert parse(stream).error == "stream_error"


def test_falsy_error_key_is_not_an_error():
    chunk = O_CHUNKS[1].replace('"usage":null', '"usage":null,"error":null')
    s = parse(o_stream([O_CHUNKS[0], chunk, *O_CHUNKS[2:]]))
    assert s.error is None and len(s.token_times) == 3


def test_every_truncation_is_incomplete_unless_done_arrived():
    done_from = O_STREAM.index(b"[DONE]") + len(b"[DONE]")
    for cut in range(len(O_STREAM)):
        s = parse(O_STREAM[:cut])
        assert s.error == (None if cut >= done_from else "incomplete_stream"), cut


def test_non_json_data_is_bad_json():
    assert parse(o_stream([O_CHUNKS[0], "{nope", *O_CHUNKS[1:]])).error == "bad_json"
    assert parse(o_stream([O_CHUNKS[0], "42", *O_CHUNKS[1:]])).error == "bad_json"


def test_invalid_utf8_is_bad_sse():
    bad = O_STREAM.replace("ö".encode(), b"\xf6")
    want = meaning(parse(bad))
    assert want["error"] == "bad_sse" and want["n_chunks"] == 1
    for cut in range(len(bad) + 1):
        assert meaning(parse(split_at(bad, [cut]))) == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(min_value=100, max_value=600))
def test_garbage_never_raises(pieces, status):
    assert parse(pieces, status=status).error is not None
    assert parse(pieces, spec=NOSTREAM, status=status).error is not None


def test_a_stream_of_nothing_but_done_is_an_empty_stream():
    # Hypothesis found it: a 200 whose whole answer is `data: [DONE]` read as a success with
    # 0 tokens (#44 item 9). An answer that never began is an error.
    for body in (b"data:[DONE]\n\n", b": keep-alive\n\ndata: [DONE]\n\n"):
        s = parse(body)
        assert (s.error, s.output_tokens, s.token_times) == ("empty_stream", None, [])
    assert parse(O_STREAM).error is None  # a chunk before [DONE] opens the stream


def test_timing_headers():
    headers = {
        "x-request-received-time": "1764400009.5",
        "x-request-dispatch-time": "1764400009.6",
        "x-request-start-time": "1764400009.7",
    }
    s = parse(O_STREAM, headers=headers)
    assert (s.srv_received, s.srv_dispatch, s.srv_start) == (
        1764400009.5,
        1764400009.6,
        1764400009.7,
    )
    assert s.srv_gpu_ms == 0.75  # GPU time only comes in the body


# ------------------------------------------------------------------ HTTP errors
@pytest.mark.parametrize(
    ("status", "headers", "retry"),
    [
        (429, {"retry-after": "7"}, 7.0),
        (503, {"retry-after-ms": "20"}, 0.02),
        (500, {}, None),
    ],
)
def test_http_errors(status, headers, retry):
    parser = OpenAIDialect(CONFIG).parser(SPEC)
    s = feed(parser, [O_ERROR_BODY], status=status, headers=headers)
    assert s.error == f"http_{status}" and s.retry_after_s == retry


# ------------------------------------------------------------------ non-streaming
def test_non_streaming_body():
    parser = OpenAIDialect(CONFIG).parser(NOSTREAM)
    s = feed(parser, [O_BODY[:5], O_BODY[5:]], headers=JSON_HEADERS)
    assert s.error is None
    assert s.t_first_token == 1001 and s.token_times == [1001]
    assert (s.prompt_tokens, s.output_tokens, s.tokens_from_usage) == (7, 9, True)
    assert s.text_chars == len("Hello, wörld") and s.srv_gpu_ms == 3.0
    assert parser.stop_reason == "stop"


def test_non_streaming_null_content_and_no_usage():
    body = b'{"choices":[{"index":0,"message":{"role":"assistant","content":null}}]}'
    s = parse(body, spec=NOSTREAM)
    assert s.error is None and s.output_tokens == 0 and s.token_times == []


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"nope", "bad_json"),
        (b'{"id":"x"}', "bad_json"),
        (b'{"error":{"type":"server_error","message":"m"}}', "stream_server_error"),
    ],
)
def test_non_streaming_bad_bodies(body, want):
    assert parse(body, spec=NOSTREAM).error == want


def test_non_streaming_body_over_the_cap():
    parser = OpenAIDialect(CONFIG, max_body_bytes=100).parser(NOSTREAM)
    assert feed(parser, [O_BODY]).error == "too_large"
