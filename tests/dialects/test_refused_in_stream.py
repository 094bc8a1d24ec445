"""A refusal in disguise: a 2xx answer whose stream (or body) carries an overload error
before any token is the error class `refused_in_stream`; after a token, or without an
overload sign, it stays `stream_error` / `stream_<type>` (zqbench.dialects.parser)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.dialects.frames import (
    A_EVENTS,
    O_CHUNKS,
    VLLM_REFUSAL_ANTHROPIC,
    VLLM_REFUSAL_OPENAI,
    a_frame,
    a_stream,
    feed,
    o_stream,
)
from zqbench.dialects import get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec, ResponseSummary
from zqbench.dialects.common import overload_sign, reported_in_stream

STREAM = RequestSpec("c", "p", 16)
BODY = RequestSpec("c", "p", 16, stream=False)
CONFIG = DialectConfig(model="m")
JSON = {"content-type": "application/json"}

QUOTED = "{'error': {'message': 'Th...am': None, 'code': 503}}"
OVERLOADED: list[dict[str, Any]] = [
    {"message": "busy", "type": "Service Unavailable", "code": 503},
    {"message": "busy", "type": "x", "code": "503"},
    {"message": "busy", "type": "x", "code": " 429 "},
    {"message": "busy", "status": 529},
    {"message": "busy", "status_code": "529"},
    {"type": "overloaded_error", "message": "Overloaded"},
    {"type": "rate_limit_error", "message": "slow down"},
    # vLLM's Anthropic route: the OpenAI route's chunk quoted in a validation error, in the
    # double quotes of JSON too
    {"type": "internal_error", "message": f"x input_value={QUOTED}, input_type=dict]"},
    {"type": "api_error", "message": 'quoted {"error": {"type": "x", "code": "529"}} here'},
]  # fmt: skip
NOT_OVERLOADED: list[tuple[Any, str]] = [
    ({"message": "boom", "type": "server_error", "code": 500}, "stream_server_error"),
    ({"message": "boom", "type": "server_error", "code": None}, "stream_server_error"),
    ({"message": "x", "code": True}, "stream_error"),  # a bool is no status
    ({"message": "x", "code": 503.0}, "stream_error"),  # nor a float
    ({"message": "x", "code": "5030"}, "stream_error"),
    ({"message": "x", "code": "٥٠٣"}, "stream_error"),  # digits, but not ASCII ones
    ({"message": "x", "code": [503]}, "stream_error"),
    ({"message": "x", "type": "Overloaded_Error"}, "stream_error"),  # not a plain type
    ({"type": "api_error", "message": "upstream said 503, try again"}, "stream_api_error"),
    # a quoted error object whose own code is no overload; a 503 outside it is no sign
    ({"type": "api", "message": "{'error': {'code': 500}}, 'code': 503}"}, "stream_api"),
    ({"type": "bad_request", "message": "max_tokens: 503 > 64"}, "stream_bad_request"),
    ("the server is overloaded (503)", "stream_error"),  # a bare string has no fields
    ([{"code": 503}], "stream_error"),
]  # fmt: skip


def _parse(api: str, pieces: list[bytes], spec: RequestSpec = STREAM, **kw: Any) -> ResponseSummary:
    summary: ResponseSummary = feed(get_dialect(api, CONFIG).parser(spec), pieces, **kw)
    return summary


def _before_any_token(api: str, err: Any) -> bytes:
    """A stream whose error comes first (Anthropic: after message_start, no text yet)."""
    if api == "anthropic":
        start = a_stream(A_EVENTS[:2])  # message_start, content_block_start (empty)
        return start + a_frame("error", json.dumps({"type": "error", "error": err}))
    return o_stream([O_CHUNKS[0], json.dumps({"error": err}), "[DONE]"])  # after the role chunk


def _after_a_token(api: str, err: Any) -> bytes:
    if api == "anthropic":
        error = json.dumps({"type": "error", "error": err})
        return a_stream(A_EVENTS[:4]) + a_frame("error", error)
    return o_stream([*O_CHUNKS[:2], json.dumps({"error": err}), "[DONE]"])


def _body(api: str, err: Any) -> bytes:
    obj = {"type": "error", "error": err} if api == "anthropic" else {"error": err}
    return json.dumps(obj).encode()


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("err", OVERLOADED)
def test_an_overload_error_before_any_token_is_a_refusal(api: str, err: dict[str, Any]) -> None:
    assert overload_sign(err)
    s = _parse(api, [_before_any_token(api, err)])
    assert s.error == "refused_in_stream" and reported_in_stream(s.error)
    assert s.token_times == [] and s.t_first_token is None
    # A non-streamed 2xx body that is the error object: no token either.
    assert _parse(api, [_body(api, err)], BODY, headers=JSON).error == "refused_in_stream"


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("err", OVERLOADED)
def test_after_a_token_the_same_error_is_a_broken_stream(api: str, err: dict[str, Any]) -> None:
    s = _parse(api, [_after_a_token(api, err)])
    kind = err.get("type")
    plain = isinstance(kind, str) and kind.islower() and " " not in kind
    assert s.error == (f"stream_{kind}" if plain else "stream_error")
    assert len(s.token_times) == 1


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize(("err", "want"), NOT_OVERLOADED)
def test_an_error_without_an_overload_sign_is_not_a_refusal(api: str, err: Any, want: str) -> None:
    assert not overload_sign(err)
    assert _parse(api, [_before_any_token(api, err)]).error == want
    assert _parse(api, [_body(api, err)], BODY, headers=JSON).error == want


def test_vllms_own_refusals_in_disguise_on_both_routes() -> None:
    """The bytes vLLM 0.32 sent (tests/dialects/frames.py), split anywhere."""
    for api, body in (("openai", VLLM_REFUSAL_OPENAI), ("anthropic", VLLM_REFUSAL_ANTHROPIC)):
        for cut in range(0, len(body), 7):
            s = _parse(api, [body[:cut], body[cut:]])
            assert s.error == "refused_in_stream", (api, cut)
            assert s.status == 200 and s.token_times == []


def test_a_finish_chunk_before_the_error_counts_as_a_token() -> None:
    """An OpenAI chunk with empty text beside finish_reason is held as a maybe-token: the
    server generated, so an error after it is no refusal."""
    finish = O_CHUNKS[3].replace('" ☃!"', '""')
    stream = o_stream([O_CHUNKS[0], finish, json.dumps({"error": {"code": 503}}), "[DONE]"])
    assert _parse("openai", [stream]).error == "stream_error"


def test_an_error_status_is_no_refusal_in_disguise() -> None:
    """A 503 with the same body is a refusal by its status (http_503), not in disguise."""
    err = {"message": "busy", "code": 503}
    assert _parse("openai", [_body("openai", err)], BODY, status=503, headers=JSON).error == (
        "http_503"
    )
