"""Session-scoped targets and reports: each reference-server run happens once per session."""

from __future__ import annotations

import re

import pytest

from tests.conftest import PerAttempt
from zqbench.conform import ConformOptions, ConformReport, run_conformance
from zqbench.target import control
from zqbench.target.embedded import EmbeddedServer

# Matches on every response of either scheduler, so headers.1 runs (and passes) on both.
STAMP_HEADER = r"x-request-received-time~^\d+\.\d{6}$"


def reference_run(scheduler: str) -> tuple[ConformReport, dict[str, float]]:
    """The report, and the server's own count of its refusals by reason once it ended
    (refserver_requests_rejected_total, from its /metrics)."""
    with EmbeddedServer(engine="sim", scheduler=scheduler, max_batch_size=4) as srv:
        options = ConformOptions(
            target=srv.base_url,
            apis=("anthropic", "openai"),
            expect_headers=(STAMP_HEADER,),
            low_load_requests=20,
        )
        report = run_conformance(options)
        return report, rejections(control.get_text(srv.base_url + "/metrics"))


def rejections(metrics: str) -> dict[str, float]:
    """refserver_requests_rejected_total by its `reason` label."""
    out = {}
    for m in re.finditer(
        r'^refserver_requests_rejected_total\{reason="([^"]+)"\} (\S+)$', metrics, re.M
    ):
        out[m[1]] = float(m[2])
    return out


# Once per session, and again for a rerun (per_attempt): a conform run judges timing.
@pytest.fixture
def zero_queue_run(per_attempt: PerAttempt) -> tuple[ConformReport, dict[str, float]]:
    return per_attempt("conform zero-queue", lambda: reference_run("zero-queue"))


@pytest.fixture
def zero_queue_report(zero_queue_run: tuple[ConformReport, dict[str, float]]) -> ConformReport:
    return zero_queue_run[0]


@pytest.fixture
def fifo_report(per_attempt: PerAttempt) -> ConformReport:
    return per_attempt("conform fifo", lambda: reference_run("fifo")[0])
