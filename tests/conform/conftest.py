"""Session-scoped targets and reports: each reference-server run happens once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zqbench.conform import ConformOptions, ConformReport, run_conformance
from zqbench.target.embedded import EmbeddedServer

# Matches on every response of either scheduler, so headers.1 runs (and passes) on both.
STAMP_HEADER = r"x-request-received-time~^\d+\.\d{6}$"


def reference_report(scheduler: str) -> Iterator[ConformReport]:
    with EmbeddedServer(engine="sim", scheduler=scheduler, max_batch_size=4) as srv:
        options = ConformOptions(
            target=srv.base_url,
            apis=("anthropic", "openai"),
            expect_headers=(STAMP_HEADER,),
            low_load_requests=20,
        )
        yield run_conformance(options)


@pytest.fixture(scope="session")
def zero_queue_report() -> Iterator[ConformReport]:
    yield from reference_report("zero-queue")


@pytest.fixture(scope="session")
def fifo_report() -> Iterator[ConformReport]:
    yield from reference_report("fifo")
