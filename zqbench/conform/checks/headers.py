"""headers.*: the user's own expectations, checked on every response the run received.

`--expect-header 'NAME=VALUE'` needs that exact value; `'NAME~REGEX'` a value in which the
regular expression matches (re.search). This is the response-validation middleware of the
original deployment guide, as a general feature.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zqbench.conform.context import Context
from zqbench.conform.model import Check, CheckResult, failed, passed, skipped


@dataclass(frozen=True, slots=True)
class Expectation:
    spec: str
    name: str  # lower case
    value: str | None = None
    pattern: re.Pattern[str] | None = None

    def problem(self, headers: dict[str, str]) -> str | None:
        got = headers.get(self.name)
        if got is None:
            return f"{self.name} is absent"
        if self.value is not None and got != self.value:
            return f"{self.name} is {got[:80]!r}, expected {self.value!r}"
        if self.pattern is not None and not self.pattern.search(got):
            return f"{self.name} is {got[:80]!r}, which does not match {self.pattern.pattern!r}"
        return None


def parse_expectation(spec: str) -> Expectation:
    """'NAME=VALUE' or 'NAME~REGEX'; ValueError with a one-line reason otherwise."""
    i_eq, i_re = spec.find("="), spec.find("~")
    cuts = [i for i in (i_eq, i_re) if i > 0]
    if not cuts:
        raise ValueError(f"--expect-header {spec!r}: use 'NAME=VALUE' or 'NAME~REGEX'")
    cut = min(cuts)
    name = spec[:cut].strip().lower()
    rest = spec[cut + 1 :]
    if not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9a-z-]+", name):
        raise ValueError(f"--expect-header {spec!r}: {name!r} is not a header name")
    if spec[cut] == "=":
        return Expectation(spec, name, value=rest.strip())
    try:
        return Expectation(spec, name, pattern=re.compile(rest))
    except re.error as e:
        raise ValueError(f"--expect-header {spec!r}: bad regular expression: {e}") from None


def expected_headers(ctx: Context) -> CheckResult:
    if not ctx.options.expect_headers:
        return skipped("no --expect-header given")
    expectations = [parse_expectation(s) for s in ctx.options.expect_headers]
    responses = [ex for ex in ctx.seen if ex.status]
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
