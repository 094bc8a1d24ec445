"""The bundled reference server: zero-queue keeps the contract, fifo breaks it with evidence."""

from __future__ import annotations

from tests.conform.util import failing, outcome
from zqbench.conform import ConformReport


def test_zero_queue_passes_every_check(zero_queue_report: ConformReport) -> None:
    assert failing(zero_queue_report) == {}
    skipped = {o.id for o in zero_queue_report.outcomes if o.status == "skip"}
    assert skipped == {"errors.6"}  # no key configured; HTTP/2 (h2c) is spoken and passes
    assert zero_queue_report.duration_s < 60


def test_fifo_fails_the_checks_a_queue_breaks(fifo_report: ConformReport) -> None:
    assert set(failing(fifo_report)) == {"zeroqueue.5", "zeroqueue.6"}


def test_fifo_evidence_says_why(fifo_report: ConformReport) -> None:
    slope = outcome(fifo_report, "zeroqueue.5")
    assert "hidden queue" in slope.reason
    assert slope.evidence["ci95_ms"][0] > slope.evidence["tolerance_ms"]
    assert slope.evidence["steps"][-1]["refused_or_failed"] == 0  # it admitted everything
    refuses = outcome(fifo_report, "zeroqueue.6")
    assert "a queue" in refuses.reason
    assert refuses.evidence["counts"] == {"admitted": 32}
    assert refuses.evidence["burst_ttft_max_ms"] > 3 * refuses.evidence["baseline_ttft_ms"]
    # Nothing was refused, so the refusal checks cannot judge anything: skipped, saying so.
    for check_id in ("zeroqueue.7", "zeroqueue.8", "zeroqueue.9"):
        assert outcome(fifo_report, check_id).status == "skip"
