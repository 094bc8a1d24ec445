"""HTTP-level rules: the Content-Type rule, framing, what the probes publish, the limit flags."""

from __future__ import annotations

import json
import resource
import socket

import httpx
import pytest

from reference_server.cli import build_parser, config_from_args
from reference_server.config import ServerConfig
from reference_server.server import connection_cap
from tests.reference_server.conftest import MODEL, Server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)

MSG = [{"role": "user", "content": "hi"}]
BODY = json.dumps({"model": MODEL, "max_tokens": 2, "messages": MSG}).encode()
JSON = {"content-type": "application/json"}


def _raw(server: Server, request: bytes) -> bytes:
    """Send raw bytes on a fresh connection; return everything read until the server closes."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
            if b"\r\n\r\n" in out and out.count(b"HTTP/1.1 ") > 1:
                break
        return out


def test_generation_routes_require_json_content_type(zq_server: Server) -> None:
    """A browser "simple" POST (text/plain, form, none) is refused with 415 in the dialect's
    shape before the body is used, so a page cannot reach a keyless local server (CSRF)."""
    u = zq_server.url
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"content-type": ctype} if ctype else {}
        r = httpx.post(u + "/v1/messages", content=BODY, headers=headers)
        assert r.status_code == 415, r.text
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert "application/json" in r.json()["error"]["message"]
        r = httpx.post(u + "/v1/chat/completions", content=BODY, headers=headers)
        assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
        r = httpx.post(u + "/v1/messages/count_tokens", content=BODY, headers=headers)
        assert r.status_code == 415
    ok = {"content-type": "Application/JSON; charset=utf-8"}
    assert httpx.post(u + "/v1/messages", content=BODY, headers=ok).status_code == 200


def test_count_tokens_lone_surrogate_is_400(zq_server: Server) -> None:
    body = b'{"model": "%s", "messages": [{"role": "user", "content": "\\udc00"}]}' % MODEL.encode()
    r = httpx.post(zq_server.url + "/v1/messages/count_tokens", content=body, headers=JSON)
    assert r.status_code == 400, r.text
    assert "lone surrogate" in r.json()["error"]["message"]


def test_malformed_chunked_body_is_a_json_400(zq_server: Server) -> None:
    """A chunk size that is not hex: granian reports it as a disconnect; the client still
    gets the dialect's 400, not granian's plain-text 500."""
    head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    for framing in (b"zz\r\nabc\r\n0\r\n\r\n", b"5\r\nabcdefgh\r\n0\r\n\r\n"):
        out = _raw(zq_server, head + b"transfer-encoding: chunked\r\n\r\n" + framing)
        assert out.startswith(b"HTTP/1.1 400 "), out
        body = json.loads(out.split(b"\r\n\r\n", 1)[1])
        assert body["error"]["type"] == "invalid_request_error"


def test_content_length_with_chunked_is_never_read_two_ways(zq_server: Server) -> None:
    """Both Content-Length and chunked: the HTTP layer (hyper) drops Content-Length before the
    app sees the request, reads the chunked body, and closes the connection after answering,
    so bytes hidden behind the declared length can never become a second (smuggled) request."""
    smuggled = b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    out = _raw(
        zq_server,
        b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\ntransfer-encoding: chunked\r\n\r\n"
        % len(BODY)
        + chunked
        + smuggled,
    )
    assert out.startswith(b"HTTP/1.1 200 ") and b"connection: close" in out.lower()
    assert out.count(b"HTTP/1.1 ") == 1  # the smuggled GET was never answered


def test_probes_do_not_publish_the_sampling_seed(zq_server: Server) -> None:
    """The server seed lets anyone replay the derived per-request seeds: keep it private."""
    assert "seed" not in httpx.get(zq_server.url + "/health").json()
    info = [
        line
        for line in httpx.get(zq_server.url + "/metrics").text.splitlines()
        if line.startswith("refserver_info{")
    ]
    assert len(info) == 1 and "seed" not in info[0]


def test_limit_flags_reach_the_config() -> None:
    args = ["--body-timeout", "5", "--idle-timeout", "0.5", "--max-connections", "64"]
    cfg = config_from_args(build_parser().parse_args(args))
    assert (cfg.body_timeout_s, cfg.idle_timeout_s, cfg.max_connections) == (5.0, 0.5, 64)
    for bad in ({"body_timeout_s": 0}, {"idle_timeout_s": 0}, {"max_connections": 0}):
        with pytest.raises(ValueError):
            ServerConfig(**bad)  # type: ignore[arg-type]


def test_connection_cap_fits_the_fd_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The soft fd limit is raised to fit the cap; past the hard limit the cap is lowered,
    so accept() never fails with EMFILE."""
    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "setrlimit", lambda _, limits: set_to.append(limits))
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, resource.RLIM_INFINITY))
    assert connection_cap(1024) == 1024 and set_to[-1] == (1024 + 128, resource.RLIM_INFINITY)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (256, 512))
    assert connection_cap(1024) == 512 - 128 and set_to[-1] == (512, 512)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (4096, 4096))
    assert connection_cap(1024) == 1024 and len(set_to) == 2  # already enough: untouched
