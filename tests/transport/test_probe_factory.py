"""The httpx probe's per-phase breakdown, and URL validation in the factory."""

from __future__ import annotations

import pytest

from tests.servers import ProgrammedServer
from zqbench.errors import OptionError, UsageError
from zqbench.transport.aiohttp_h1 import AiohttpTransport
from zqbench.transport.base import ConnectError, HttpRequest, PoolLimits
from zqbench.transport.factory import make_transport
from zqbench.transport.h2_client import H2Transport
from zqbench.transport.httpx_timed import probe
from zqbench.transport.raw_h1 import RawH1Transport

DELAY = HttpRequest("GET", "/delay?ms=30&size=100", ())


@pytest.mark.parametrize("http2", [False, True])
def test_probe_fresh_connections_time_every_phase(
    http2: bool, programmed_server: ProgrammedServer
) -> None:
    results = probe(programmed_server.url, DELAY, 3, http2=http2, fresh_connections=True)
    assert len(results) == 3
    for r in results:
        assert r.error is None and r.status == 200 and r.bytes_in == 100
        assert r.http_version == ("2" if http2 else "1.1")
        assert r.dns_ns is not None and r.dns_ns >= 0
        assert r.connect_ns is not None and r.connect_ns > 0
        assert r.tls_ns is None  # plain http
        # The connect phase is timed apart from the server's 30 ms, not inside it.
        assert r.ttfb_ns is not None and r.ttfb_ns >= 30_000_000 + r.connect_ns
        assert r.total_ns >= r.ttfb_ns
        assert not r.reused_connection


def test_probe_reuses_the_connection_by_default(programmed_server: ProgrammedServer) -> None:
    first, *rest = probe(programmed_server.url, DELAY, 3)
    assert first.connect_ns is not None and not first.reused_connection
    for r in rest:
        assert r.reused_connection and r.connect_ns is None and r.dns_ns is None
        assert r.ttfb_ns is not None and r.ttfb_ns >= 30_000_000


def test_probe_times_tls(tls_server: ProgrammedServer) -> None:
    (r,) = probe(tls_server.url, DELAY, 1, insecure=True)
    assert r.error is None and r.tls_ns is not None and r.tls_ns > 0


def test_probe_records_per_request_errors(programmed_server: ProgrammedServer) -> None:
    (r,) = probe(programmed_server.url, HttpRequest("GET", "/hang", ()), 1, timeout_s=0.3)
    # At the 0.3 s deadline; up to 5 s later on a busy machine, never /hang's forever.
    assert r.error == "timeout" and r.status == 0 and 0.29e9 <= r.total_ns < 5.3e9, r
    (r,) = probe(programmed_server.url, HttpRequest("GET", "/reset?bytes=100", ()), 1)
    assert r.error == "reset" and r.status == 200


def test_probe_unreachable_raises_connect_error(refused_url: str) -> None:
    with pytest.raises(ConnectError, match=refused_url.removeprefix("http://")):
        probe(refused_url, DELAY, 2)


@pytest.mark.parametrize(
    "url",
    ["ftp://x/", "http://", "localhost:8000", "http://h:99999", "http://h:0", "http://u:p@h/",
     "http://h/?q=1", "http://h:port/"],
)  # fmt: skip
def test_factory_rejects_bad_urls_with_one_line(url: str) -> None:
    with pytest.raises(UsageError) as info:
        make_transport(url, http2=False, limits=PoolLimits())
    assert "\n" not in str(info.value)
    if "@" in url:  # the message names the URL without its credentials
        assert "u:p" not in str(info.value) and "http://h/" in str(info.value)
    else:
        assert url in str(info.value)


def test_factory_picks_by_http2_flag_and_keeps_prefix() -> None:
    h1 = make_transport("http://127.0.0.1:8000/api/", http2=False, limits=PoolLimits())
    h2 = make_transport("https://example.test", http2=True, limits=PoolLimits(), insecure=True)
    ref = make_transport("http://h/", http2=False, limits=PoolLimits(), h1_client="aiohttp")
    assert isinstance(h1, RawH1Transport) and h1.http_version == "1.1"  # the measured default
    assert isinstance(ref, AiohttpTransport) and ref.http_version == "1.1"
    with pytest.raises(OptionError, match=r"^h1_client 'curl': choose one of raw, aiohttp$"):
        make_transport("http://h/", http2=False, limits=PoolLimits(), h1_client="curl")
    assert h1.origin.prefix == "/api" and h1.origin.url("/v1") == "http://127.0.0.1:8000/api/v1"
    assert isinstance(h2, H2Transport) and h2.http_version == "2"
    assert h2.origin.port == 443 and h2.origin.authority == "example.test"
