"""The control-plane client against loopback servers: a deadline that holds whatever the
server does, a body cap, TLS verification, and one-line errors without secrets."""

from __future__ import annotations

import time

import pytest

from tests.servers import ProgrammedServer, RecordingSink
from zqbench.errors import TargetError
from zqbench.target import control
from zqbench.target.control import ControlClient, ControlError
from zqbench.transport.base import HttpRequest

# What a busy 2-core machine may add to a deadline; without the deadline these calls take
# 10 s (the drip) or forever (a silent server).
SLACK_S = 3.0


def test_a_slow_drip_cannot_hold_a_call_past_its_deadline(
    programmed_server: ProgrammedServer,
) -> None:
    """An event every 100 ms for 10 s: every read is quick, the whole answer is not."""
    t0 = time.monotonic()
    with pytest.raises(ControlError) as info:
        control.get_text(programmed_server.url + "/sse?n=100&every=100", timeout_s=0.5)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5 + SLACK_S, f"{elapsed:.3f} s: the drip held the call past its deadline"
    assert info.value.error_class == "timeout"
    assert str(info.value).endswith("/sse?n=100&every=100: no complete answer within 0.5 s")


def test_a_silent_server_times_out_with_headers_or_without(
    programmed_server: ProgrammedServer,
) -> None:
    with ControlClient(timeout_s=0.3) as client:
        for path in ("/hang", "/hang?head=1"):
            sink = RecordingSink()
            t0 = time.monotonic()
            ex = client.send(programmed_server.url, HttpRequest("GET", path, ()), sink)
            elapsed = time.monotonic() - t0
            assert elapsed < 0.3 + SLACK_S, f"{path}: {elapsed:.3f} s"
            assert ex.error is not None and ex.error.error_class == "timeout"
            assert sink.t_end == 0  # a failed call never reports an end


def test_a_huge_body_stops_at_the_cap(programmed_server: ProgrammedServer) -> None:
    with ControlClient(max_body_bytes=1_000_000) as client:
        sink = RecordingSink()
        ex = client.send(programmed_server.url, HttpRequest("GET", "/big?bytes=20000000", ()), sink)
        assert ex.error is not None and ex.error.error_class == "too_large"
        assert len(sink.body) <= 1_000_000 < ex.bytes_in  # the chunk past the cap is not kept
        with pytest.raises(ControlError, match="the body passed the 1000000-byte cap") as info:
            client.get_text(programmed_server.url + "/big?bytes=20000000")
        assert info.value.error_class == "too_large"


def test_send_streams_the_answer_to_the_sink_as_it_arrives(
    programmed_server: ProgrammedServer,
) -> None:
    with ControlClient() as client:
        sink = RecordingSink()
        ex = client.send(programmed_server.url, HttpRequest("GET", "/sse?n=3&every=50", ()), sink)
        assert ex.error is None and ex.http_version == "1.1"
        assert sink.status == 200 and sink.headers["content-type"].startswith("text/event-stream")
        assert sink.body.endswith(b"data: [DONE]\n\n") and ex.bytes_in == len(sink.body)
        times = [t for t, _ in sink.chunks]
        assert times[-1] - times[0] >= 90e6  # pieces stamped when they came, 50 ms apart
        assert ex.t_send < sink.t_headers <= times[0] <= ex.t_end == sink.t_end
        client.send(programmed_server.url, HttpRequest("GET", "/health", ()), RecordingSink())
        assert client.connections_opened == 1  # the second call reused the connection


def test_non_2xx_and_non_json_answers_are_errors_naming_the_call(
    programmed_server: ProgrammedServer,
) -> None:
    with pytest.raises(ControlError) as info:
        control.get_json(programmed_server.url + "/status?code=503")
    assert (info.value.error_class, info.value.status) == ("http_503", 503)
    assert str(info.value) == f"GET {programmed_server.url}/status?code=503: HTTP 503"
    assert info.value.exit_code == 3
    with pytest.raises(ControlError, match="the answer is not JSON") as info:
        control.get_json(programmed_server.url + "/health")  # "ok" is not JSON
    assert info.value.error_class == "bad_json"
    with ControlClient() as client:
        assert client.post_json(programmed_server.url + "/echo", b'{"a": [1]}') == {"a": [1]}


def test_credentials_never_reach_an_error(refused_url: str) -> None:
    with pytest.raises(ControlError) as info:
        control.get_json(refused_url + "/v1/models?api_key=sk-secret-123456789")
    assert "sk-secret" not in str(info.value)
    assert info.value.error_class == "connect"


def test_check_reachable_names_the_address_and_the_reason(
    refused_url: str, blackhole_url: str, programmed_server: ProgrammedServer
) -> None:
    control.check_reachable(programmed_server.url)  # any HTTP answer will do
    address = refused_url.removeprefix("http://")
    with pytest.raises(TargetError) as info:
        control.check_reachable(refused_url)
    assert str(info.value) == f"cannot reach {address}: Connection refused"
    with pytest.raises(TargetError) as info:
        control.check_reachable(blackhole_url, timeout_s=0.3)
    assert str(info.value) == f"cannot reach {blackhole_url[7:]}: no answer within 0.3 s"


def test_tls_is_verified_unless_insecure(tls_server: ProgrammedServer) -> None:
    """A self-signed certificate fails verification, as it does for the load transports."""
    with pytest.raises(TargetError, match="certificate verify failed"):
        control.check_reachable(tls_server.url)
    control.check_reachable(tls_server.url, insecure=True)
    assert control.get_text(tls_server.url + "/health", insecure=True) == "ok\n"
