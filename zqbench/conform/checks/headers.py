"""headers.*: the user's own expectations, checked on every response the run received.

`--expect-header 'NAME=VALUE'` needs that exact value; `'NAME~REGEX'` a value in which the
regular expression matches (re.search). This is the response-validation middleware of the
original deployment guide, as a general feature.
"""

from __future__ import annotations

from zqbench.conform.model import Check, CheckResult, failed, passed, skipped
from zqbench.conform.observations import Observations
from zqbench.conform.options import parse_expectation


def expected_headers(obs: Observations) -> CheckResult:
    """Judged on every exchange of the run's phases (it needs none of its own)."""
    if not obs.target.options.expect_headers:
        return skipped("no --expect-header given")
    expectations = [parse_expectation(s) for s in obs.target.options.expect_headers]
    responses = [ex for ex in obs.seen if ex.status]
    if not responses:
        return skipped("no response was received")
    for ex in responses:
        for e in expectations:
            problem = e.problem(ex.headers)
            if problem:
                bad = sum(1 for x in responses if e.problem(x.headers))
                return failed(
                    f"{problem} ({bad} of {len(responses)} responses)",
                    expectation=e.spec,
                    response=ex.evidence(body=False),
                )
    return passed(f"{len(expectations)} expectations held on {len(responses)} responses")


CHECKS = [
    Check(
        "headers.1",
        "Every response carries the headers declared with --expect-header.",
        expected_headers,
    ),
]
