"""Each deliberately broken fixture server makes exactly its check fail (its checks, where
FAULTS says why one fault breaks two), and no other."""

from __future__ import annotations

import pytest

from tests.conform.fake_server import FAULTS, FakeServer
from tests.conform.util import INSTRUMENTATION, failing, fake_options
from zqbench.conform import run_conformance
from zqbench.conform.catalogue import CATALOGUE
from zqbench.outputs.conform import format_summary

# The reference server's instrumentation: a target without it fails these checks only where
# the run requires it (--require-instrumentation); otherwise they skip as not instrumented.
UNINSTRUMENTED = {"uninstrumented", "health_no_jitter"}


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
            require_instrumentation=fault in UNINSTRUMENTED,
            api_key="conform-test-key" if fault == "no_auth" else None,
        )
        report = run_conformance(options)
    fails = failing(report)
    assert set(fails) == _breaks(fault), fails
    assert all(fails.values())  # the reason says why


@pytest.mark.slow
def test_a_target_without_the_instrumentation_is_judged_on_behaviour() -> None:
    with FakeServer({"uninstrumented"}) as srv:
        report = run_conformance(fake_options(srv.base_url))
    assert failing(report) == {}
    assert report.ok
    assert list(report.not_instrumented) == INSTRUMENTATION
    reason = {o.id: o.reason for o in report.outcomes}
    stamps = "not instrumented: no X-Request-Received/Dispatch/Start-Time headers"
    assert reason["zeroqueue.1"] == reason["zeroqueue.2"] == reason["zeroqueue.3"] == stamps
    assert (
        reason["zeroqueue.4"]
        == "not instrumented: GET /health: status 200, no `dispatch_jitter_us`"
    )
    assert [o.id for o in report.outcomes if o.kind == "instrumentation"] == INSTRUMENTATION
    assert format_summary(report).splitlines()[0] == (
        "not instrumented: zeroqueue.1, zeroqueue.2, zeroqueue.3, zeroqueue.4 unmeasured, "
        "the verdict rests on behaviour (--require-instrumentation fails them)"
    )
