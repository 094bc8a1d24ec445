"""The set-up probes that give a run its at-rest TTFT (zqbench.target.at_rest), against a
server whose first token comes at a programmed time, and against one that refuses."""

from __future__ import annotations

import pytest

from tests.servers import ProgrammedServer
from zqbench.dialects.base import DialectConfig
from zqbench.summary import AtRest, Unavailable
from zqbench.target.at_rest import measure_at_rest, probe_sizes

FIRST_MS = 40.0  # the programmed server's first token, after the request was read


def programmed(path: str) -> DialectConfig:
    return DialectConfig(model="m", extra_headers=(("x-program", path),))


def _refusing(server: ProgrammedServer, *, per_size: int) -> AtRest | Unavailable:
    """Probes at 32 tokens to a server that answers every request 503."""
    config = programmed("/status?code=503")
    return measure_at_rest(server.url, "anthropic", config, (32,), per_size, calibration=None)


def test_each_probe_reads_the_first_token_at_its_programmed_time(
    programmed_server: ProgrammedServer,
) -> None:
    config = programmed(f"/anthropic?n=2&every=1&first={FIRST_MS:g}")
    at_rest = measure_at_rest(
        programmed_server.url, "anthropic", config, (32, 256), 3, calibration=None
    )
    assert isinstance(at_rest, AtRest), at_rest
    assert [p.size for p in at_rest.probes] == [32, 32, 32, 256, 256, 256]
    for probe in at_rest.probes:
        # Never before the server wrote it; at most 25 ms of a busy client's lateness after.
        assert FIRST_MS / 1e3 <= probe.ttft < FIRST_MS / 1e3 + 0.025, probe
    # The programmed time does not depend on the prompt: the fit is flat around 40 ms.
    assert at_rest.base == pytest.approx(FIRST_MS / 1e3, abs=0.025)
    assert abs(at_rest.slope) * 256 < 0.025
    assert 0 <= at_rest.spread < 0.025


def test_a_refused_probe_leaves_the_baseline_unavailable_with_the_status(
    programmed_server: ProgrammedServer,
) -> None:
    at_rest = _refusing(programmed_server, per_size=3)
    assert at_rest == Unavailable(unavailable=f"at-rest probe to {programmed_server.url}: HTTP 503")


def test_no_probes_are_sent_when_asked_for_none(programmed_server: ProgrammedServer) -> None:
    programmed_server.reset()
    at_rest = _refusing(programmed_server, per_size=0)
    assert at_rest == Unavailable(
        unavailable="[outcomes] at_rest_probes = 0: no baseline was measured"
    )
    assert programmed_server.all_truth()["requests"] == 0


def test_probe_sizes_are_the_classes_extremes_and_a_long_prompt_within_the_context() -> None:
    assert probe_sizes([32, 512, 128], None) == (32, 512, 2048)
    assert probe_sizes([32], 1000) == (32, 500)  # at most half the context
    assert probe_sizes([4000], 2048) == (1024,)
