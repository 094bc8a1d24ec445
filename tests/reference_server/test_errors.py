"""Every bad input gets the dialect's error JSON and a 4xx, never a 500 or a crash."""

from __future__ import annotations

import json
import string

import anthropic
import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reference_server.conftest import MODEL, Server, start_server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)

MSG = [{"role": "user", "content": "hi"}]
JSON = {"content-type": "application/json"}


def _anthropic_error(r: httpx.Response, status: int, etype: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == etype
    assert body["request_id"] == r.headers["request-id"]
    assert r.headers["request-id"].startswith("req_") and len(r.headers["request-id"]) == 28
    assert "x-request-received-time" in r.headers and r.headers["x-scheduler"] == "zero-queue"


def _openai_error(r: httpx.Response, status: int) -> None:
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"]["message"], str)
    assert "x-request-received-time" in r.headers


@pytest.mark.parametrize(
    ("body", "status", "etype"),
    [
        ({"model": MODEL, "messages": MSG}, 400, "invalid_request_error"),  # no max_tokens
        ({"model": MODEL, "max_tokens": 0, "messages": MSG}, 400, "invalid_request_error"),
        ({"model": MODEL, "max_tokens": 257, "messages": MSG}, 400, "invalid_request_error"),
        ({"model": MODEL, "max_tokens": 5, "messages": []}, 400, "invalid_request_error"),
        ({"model": MODEL, "max_tokens": 5, "messages": [{"role": "bot", "content": "x"}]}, 400,
         "invalid_request_error"),
        ({"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": "x" * 400}]},
         400, "invalid_request_error"),  # prompt + max_tokens over the 512 context
        ({"model": "nope", "max_tokens": 5, "messages": MSG}, 404, "not_found_error"),
        ({"model": MODEL, "max_tokens": 5, "messages": MSG, "execution_profile": "x"}, 400,
         "invalid_request_error"),
        ([1, 2], 400, "invalid_request_error"),
    ],
)  # fmt: skip
def test_anthropic_bad_requests(zq_server: Server, body: object, status: int, etype: str) -> None:
    r = httpx.post(zq_server.url + "/v1/messages", json=body)
    _anthropic_error(r, status, etype)


def test_bad_json_too_large_wrong_method_unknown_route(zq_server: Server) -> None:
    u = zq_server.url
    r = httpx.post(u + "/v1/messages", content=b"{nope", headers=JSON)
    _anthropic_error(r, 400, "invalid_request_error")
    big = json.dumps({"model": MODEL, "max_tokens": 1, "messages": [
        {"role": "user", "content": "x" * 70000}]})  # fmt: skip
    r = httpx.post(u + "/v1/messages", content=big, headers=JSON)
    _anthropic_error(r, 413, "request_too_large")
    r = httpx.get(u + "/v1/messages")
    _anthropic_error(r, 405, "invalid_request_error")
    assert r.headers["allow"] == "POST"
    _openai_error(httpx.get(u + "/v1/chat/completions"), 405)
    _openai_error(httpx.post(u + "/v1/chat/completions", json={"model": MODEL}), 400)
    _openai_error(httpx.post(u + "/v1/chat/completions", json={
        "model": "other", "messages": MSG}), 404)  # fmt: skip
    _openai_error(httpx.post(u + "/v1/chat/completions", json={
        "model": MODEL, "n": 2, "messages": MSG}), 400)  # fmt: skip
    assert httpx.get(u + "/nowhere").status_code == 404
    assert httpx.get(u + "/v1/models/nope").status_code == 404
    assert httpx.get(u + f"/v1/models/{MODEL}").json()["id"] == MODEL


def test_lone_surrogates_and_deep_nesting_are_400_not_500(zq_server: Server) -> None:
    u = zq_server.url + "/v1/messages"
    surrogate = (
        b'{"model": "%s", "max_tokens": 1, "messages": [{"role": "user", "content": "\\ud800"}]}'
        % MODEL.encode()
    )
    r = httpx.post(u, content=surrogate, headers=JSON)
    _anthropic_error(r, 400, "invalid_request_error")
    assert "lone surrogate" in r.json()["error"]["message"]
    deep = b'{"model": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # under the 64 KiB limit
    r = httpx.post(u, content=deep, headers=JSON)
    _anthropic_error(r, 400, "invalid_request_error")
    assert "nested too deeply" in r.json()["error"]["message"]


def test_sdk_exceptions(zq_server: Server) -> None:
    """The SDKs map our errors to their exception classes."""
    url = zq_server.url
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as a:
        with pytest.raises(anthropic.NotFoundError):
            a.messages.create(model="nope", max_tokens=5, messages=MSG)  # type: ignore[arg-type]
        with pytest.raises(anthropic.BadRequestError):
            a.messages.create(model=MODEL, max_tokens=5000, messages=MSG)  # type: ignore[arg-type]
    with (
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as o,
        pytest.raises(openai.NotFoundError),
    ):
        o.chat.completions.create(model="nope", messages=MSG)  # type: ignore[arg-type]


def test_api_key_required() -> None:
    """With an API key, both header styles work, compared in constant time; others get 401."""
    server = start_server("--engine", "sim", "--api-key-env", "ZQ_TEST_KEY",
                          env={"ZQ_TEST_KEY": "s3cret"})  # fmt: skip
    try:
        body = {"model": MODEL, "max_tokens": 3, "messages": MSG}
        u = server.url + "/v1/messages"
        _unauth = httpx.post(u, json=body, headers={"anthropic-version": "2023-06-01"})
        assert _unauth.status_code == 401
        assert _unauth.json()["error"]["type"] == "authentication_error"
        assert httpx.post(u, json=body, headers={"x-api-key": "wrong"}).status_code == 401
        assert httpx.post(u, json=body, headers={"x-api-key": "s3cret"}).status_code == 200
        auth = {"authorization": "Bearer s3cret"}
        assert httpx.post(u, json=body, headers=auth).status_code == 200
        with (
            openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0) as o,
            pytest.raises(openai.AuthenticationError),
        ):
            o.chat.completions.create(model=MODEL, messages=MSG)  # type: ignore[arg-type]
        with anthropic.Anthropic(base_url=server.url, api_key="s3cret", max_retries=0) as a:
            made = a.messages.create(model=MODEL, max_tokens=2, messages=MSG)  # type: ignore[arg-type]
            assert made.usage.output_tokens == 2
        assert httpx.get(server.url + "/health").status_code == 200  # probes need no key
    finally:
        server.stop()


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(string.printable, max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(string.ascii_letters, max_size=8), children, max_size=4),
    max_leaves=12,
)  # fmt: skip
_fields = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from([MODEL, "x"]) | _json,
        "max_tokens": st.integers(-5, 600) | _json,
        "max_completion_tokens": st.integers(-5, 600) | _json,
        "messages": st.lists(st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "system", "x"]) | _json,
             "content": st.text(max_size=30) | _json}), max_size=3) | _json,
        "system": _json, "stream": st.booleans() | _json, "stop_sequences": _json, "stop": _json,
        "temperature": _json, "stream_options": _json, "n": _json, "seed": _json,
        "execution_profile": st.sampled_from(["low-latency", "long-context"]) | _json,
    },
)  # fmt: skip


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(["/v1/messages", "/v1/chat/completions", "/v1/messages/count_tokens"]),
       body=_fields | _json)  # fmt: skip
def test_fuzz_never_500(zq_server: Server, path: str, body: object) -> None:
    """Random bodies on every POST route: always a 2xx or a 4xx/529/503 in the dialect's JSON."""
    r = httpx.post(zq_server.url + path, content=json.dumps(body), headers=JSON, timeout=30)
    assert r.status_code < 500 or r.status_code in (503, 529), r.text
    assert "x-request-received-time" in r.headers
    if r.status_code >= 400:
        assert "error" in r.json()
