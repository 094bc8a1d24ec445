"""`zqbench probe`: sequential requests with a curl-style breakdown."""

from __future__ import annotations

import pytest

from tests.core.conftest import MODEL, zqbench
from tests.core.test_run_cli import closed_port
from tests.servers import ProgrammedServer
from zqbench.errors import OptionError, TargetError
from zqbench.target.embedded import EmbeddedServer
from zqbench.target.probe import ProbeOptions, format_probe, probe_requests, run_probe


def test_probe_breaks_down_each_phase(ref_server: EmbeddedServer) -> None:
    report = run_probe(ProbeOptions(target=ref_server.base_url, model=MODEL, n=20, max_tokens=4))
    assert report.ok and report.ok_count == 20
    phases = {p.name: p for p in report.phases}
    assert list(phases) == ["dns", "connect", "tls", "ttfb", "ttft", "total"]
    assert phases["connect"].n == 1  # one keep-alive connection for all 20
    assert phases["tls"].n == 0 and phases["tls"].p50_ms is None  # plain http: no TLS phase
    assert phases["ttfb"].n == phases["ttft"].n == phases["total"].n == 20
    assert 0 < phases["ttfb"].p50_ms <= phases["ttft"].p50_ms <= phases["total"].p50_ms  # type: ignore[operator]
    assert report.ratio_phase == "ttft"
    assert report.ratio_p99_p50 is not None and report.ratio_p99_p50 >= 1.0
    assert (report.output_tokens_p50, report.tokens_from_usage) == (4, True)
    text = format_probe(report)
    assert "ttft p99/p50 = " in text and "status: 200: 20" in text
    assert "output tokens p50 = 4 (usage)" in text
    rows = [line.split()[0] for line in text.splitlines()[2:8]]
    assert rows == ["dns", "connect", "tls", "ttfb", "ttft", "total"]


@pytest.mark.parametrize("stream", [True, False])
def test_each_request_has_its_first_token_after_its_headers(
    ref_server: EmbeddedServer, stream: bool
) -> None:
    """Streamed: the first token event; not streamed: the body's arrival."""
    options = ProbeOptions(target=ref_server.base_url, model=MODEL, n=5, stream=stream)
    for r in probe_requests(options):
        assert r.ok and r.ttft_ns is not None and r.timed.ttfb_ns is not None
        assert r.timed.ttfb_ns <= r.ttft_ns <= r.timed.total_ns


@pytest.mark.slow
def test_ttft_shows_a_wait_that_ttfb_hides(programmed_server: ProgrammedServer) -> None:
    """Headers at once, the first token 300 ms later (as vLLM answers a queued request)."""
    program = "x-program: /anthropic?n=4&every=5&first=300&head=0"
    options = ProbeOptions(target=programmed_server.url, model="m", n=3, headers=(program,))
    requests = probe_requests(options)
    for r in requests:
        assert r.ok and r.read.summary.token_events == 4
        assert r.ttft_ns is not None and r.timed.ttfb_ns is not None
        assert r.ttft_ns - r.timed.ttfb_ns >= 250_000_000
    report = run_probe(options)
    phases = {p.name: p for p in report.phases}
    assert phases["ttft"].p50_ms - phases["ttfb"].p50_ms >= 250  # type: ignore[operator]
    assert report.ratio_phase == "ttft"


def test_fresh_connections_time_connect_every_time(ref_server: EmbeddedServer) -> None:
    report = run_probe(
        ProbeOptions(target=ref_server.base_url, model=MODEL, n=5, fresh_connections=True)
    )
    assert {p.name: p.n for p in report.phases}["connect"] == 5


def test_unreachable_and_bad_input() -> None:
    with pytest.raises(TargetError, match=r"127\.0\.0\.1"):
        run_probe(ProbeOptions(target=f"http://127.0.0.1:{closed_port()}", n=1))
    with pytest.raises(OptionError, match=r"^n 0: must be at least 1$") as bad_n:
        run_probe(ProbeOptions(target="http://127.0.0.1:1", n=0))
    assert bad_n.value.option == "n"


@pytest.mark.slow
def test_probe_cli_exit_codes(ref_server: EmbeddedServer) -> None:
    ok = zqbench("probe", "--target", ref_server.base_url, "--model", MODEL, "-n", "3")
    assert ok.returncode == 0 and "3 sequential requests, 3 ok" in ok.stdout
    bad_model = zqbench("probe", "--target", ref_server.base_url, "--model", "nope", "-n", "2")
    assert bad_model.returncode == 2 and "model 'nope' refused by the target" in bad_model.stderr
    bad_n = zqbench("probe", "--target", ref_server.base_url, "-n", "0")
    assert bad_n.returncode == 2
    assert bad_n.stderr.strip() == "zqbench: error: -n 0: must be at least 1"
