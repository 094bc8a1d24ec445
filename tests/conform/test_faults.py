"""Each deliberately broken fixture server makes exactly its check fail (its checks, where
FAULTS says why one fault breaks two), and no other."""

from __future__ import annotations

import pytest

from tests.conform.fake_server import FAULTS, FakeServer
from tests.conform.util import failing, fake_options
from zqbench.conform import run_conformance
from zqbench.conform.catalogue import CATALOGUE


def _breaks(fault: str) -> set[str]:
    value = FAULTS[fault]
    return {value} if isinstance(value, str) else set(value)


def test_every_check_has_a_fault_that_breaks_it() -> None:
    assert {c.id for c in CATALOGUE} == set().union(*(_breaks(f) for f in FAULTS))


@pytest.mark.slow
def test_the_healthy_fake_passes_every_check() -> None:
    with FakeServer() as srv:
        report = run_conformance(fake_options(srv.base_url))
    assert failing(report) == {}
    skipped = {o.id for o in report.outcomes if o.status == "skip"}
    assert skipped == {"errors.6", "http.2"}  # no key required, no HTTP/2 spoken


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_fails_exactly_its_check(fault: str) -> None:
    with FakeServer({fault}) as srv:
        options = fake_options(
            srv.base_url,
            expect_http2=fault == "no_h2",  # the endpoint "claims" HTTP/2 but does not speak it
            expect_auth=fault == "no_auth",  # a key is expected, the endpoint ignores keys
            api_key="conform-test-key" if fault == "no_auth" else None,
        )
        report = run_conformance(options)
    fails = failing(report)
    assert set(fails) == _breaks(fault), fails
    assert all(fails.values())  # the reason says why
