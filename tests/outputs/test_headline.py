"""The headline's counts: each outcome its own word, the same on every output (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zqbench.metrics.sections.text import request_counts
from zqbench.pipeline.advise import measured
from zqbench.summary import Summary

EXAMPLE = Path(__file__).resolve().parents[2] / "reports/examples/burst-zero-queue/summary.json"
ZERO = {k: 0 for k in ("served", "queued", "refused_fast", "refused_slow", "timed_out",
                       "failed", "interrupted", "undetermined")}  # fmt: skip
# (refused_in_stream absent, as in a run saved before it: the counts read it as 0)


def _with(**counts: int) -> Summary:
    summary = Summary.model_validate_json(EXAMPLE.read_text())
    assert summary.outcomes is not None
    outcomes = summary.outcomes.model_copy(update={"counts": {**ZERO, **counts}})
    return summary.model_copy(update={"outcomes": outcomes})


@pytest.mark.parametrize(
    ("counts", "line"),
    [
        ({"served": 929, "refused_fast": 19821}, "served 929, refused 19,821 (all fast), failed 0"),
        (
            {"served": 10, "queued": 190, "refused_slow": 3, "refused_fast": 1, "timed_out": 2,
             "failed": 1, "interrupted": 4, "undetermined": 5},
            "served 205 (190 after a queue, 5 not judged), refused 4 (1 fast, 3 slow), "
            "failed 3 (2 timed out), cut at the end 4",
        ),
        ({}, "served 0, refused 0, failed 0"),
        (
            {"served": 7, "refused_fast": 2, "refused_in_stream": 28, "failed": 1},
            "served 7, refused 30 (2 fast, 28 in disguise as 2xx), failed 1",
        ),
        ({"refused_in_stream": 3}, "served 0, refused 3 (3 in disguise as 2xx), failed 0"),
    ],
)  # fmt: skip
def test_the_counts_name_each_outcome(counts: dict[str, int], line: str) -> None:
    assert request_counts(_with(**counts)) == line


def test_a_run_without_outcomes_keeps_ok_and_failed() -> None:
    summary = Summary.model_validate_json(EXAMPLE.read_text()).model_copy(update={"outcomes": None})
    r = summary.requests
    assert request_counts(summary) == f"ok {r.ok:,}, failed {r.failed:,}"


def test_the_advisor_counts_a_refusal_in_disguise_as_refused() -> None:
    """vLLM's settings under a burst refuse mostly in disguise: the advisor's `refused`
    figure for a setting counts them, as the run does."""
    figures = measured(_with(served=7, refused_fast=2, refused_slow=1, refused_in_stream=28))
    assert (figures["admitted"], figures["refused"]) == (7, 31)
