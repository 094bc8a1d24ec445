"""What a conformance run is made of: phases, checks, results and the report (options:
options.py).

A phase is a named measurement of the plan (phases.py): `measure(sender, observations)`
sends its requests and returns its observation. A check is a small object with a stable
`id` (`zeroqueue.3`), the `group` it belongs to (`zeroqueue`), a one-line `statement` of
what must hold, the phases it `needs`, and `run(observations) -> CheckResult`: a pure
judgement of what those phases observed, so checks run in any order. A result is `pass`,
`fail` or `skip`; a fail carries the evidence that shows why, a skip the reason it could
not be decided.

Two kinds of check: behaviour, what every zero-queue endpoint must do (its API's shapes, no
queue, fast honest refusals, slots freed, recovery), and instrumentation, what the reference
server adds so that a queue can be seen from inside (the X-Request-*-Time stamps, /health's
dispatch jitter). An endpoint without the instrumentation is not failed for it: its
instrumentation checks skip as `not instrumented` (`uninstrumented`), and its verdict rests
on behaviour, unless the run requires instrumentation (`--require-instrumentation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from zqbench.conform.context import Sender, Target
    from zqbench.conform.evidence import Request
    from zqbench.conform.observations import Observations

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    status: Status
    reason: str = ""  # one line: why it failed or was skipped (or what passed)
    evidence: dict[str, Any] = field(default_factory=dict)
    instrumented: bool = True  # False: what it checks is instrumentation the target lacks


def passed(reason: str = "", **evidence: Any) -> CheckResult:
    return CheckResult("pass", reason, evidence)


def failed(reason: str, **evidence: Any) -> CheckResult:
    return CheckResult("fail", reason, evidence)


def skipped(reason: str, **evidence: Any) -> CheckResult:
    return CheckResult("skip", reason, evidence)


UNINSTRUMENTED = "not instrumented: "


def uninstrumented(required: bool, missing: str, **evidence: Any) -> CheckResult:
    """The target lacks the instrumentation a check reads (`missing` says which): a skip, or
    a fail where the run requires instrumentation."""
    return CheckResult("fail" if required else "skip", UNINSTRUMENTED + missing, evidence, False)


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    measure: Callable[[Sender, Observations], Any]
    after: tuple[str, ...] = ()  # phases whose observations it uses: measured before it


Cases = list[tuple[str, "Request"]]  # requests of a sequential phase, each named


def sequential(name: str, build: Callable[[Target], Cases], after: tuple[str, ...] = ()) -> Phase:
    """A phase that sends `build(target)`'s requests one at a time on the run's client;
    its observation is each case's name with its exchange."""

    def measure(sender: Sender, _: Observations) -> Any:
        return [(case, sender.send(req)) for case, req in build(sender.target)]

    return Phase(name, measure, after)


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    statement: str
    run: Callable[[Observations], CheckResult]
    needs: tuple[str, ...] = ()  # the phases whose observations it judges
    instrumentation: bool = False  # a check of instrumentation, not of behaviour

    @property
    def group(self) -> str:
        """`api.anthropic.3` -> `api.anthropic`; `errors.2` -> `errors`."""
        return self.id.rpartition(".")[0]


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check's line in the report."""

    id: str
    group: str
    statement: str
    status: Status
    reason: str
    evidence: dict[str, Any]
    duration_s: float
    kind: str = "behaviour"  # or "instrumentation"
    instrumented: bool = True

    @classmethod
    def of(cls, check: Check, result: CheckResult, duration_s: float) -> CheckOutcome:
        """The line of `check` that gave `result` in `duration_s` seconds."""
        c, r = check, result
        kind = "instrumentation" if c.instrumentation else "behaviour"
        return cls(
            c.id, c.group, c.statement, r.status, r.reason, r.evidence, duration_s, kind,
            r.instrumented,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConformReport:
    target: str  # without credentials
    apis: tuple[str, ...]
    model: str
    started_at: str  # UTC ISO 8601
    duration_s: float
    outcomes: tuple[CheckOutcome, ...]
    options: dict[str, Any]  # the bounds and thresholds the run used

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def groups(self) -> dict[str, tuple[Status, tuple[str, ...]]]:
        """Each group's verdict, in catalogue order, and its failed checks: fail when one
        failed, pass when one passed and none failed, skip when all skipped. The zeroqueue
        group alone answers "is this endpoint zero-queue?"; the others, its API and HTTP."""
        checks: dict[str, list[CheckOutcome]] = {}
        for o in self.outcomes:
            checks.setdefault(o.group, []).append(o)
        verdicts: dict[str, tuple[Status, tuple[str, ...]]] = {}
        for group, outcomes in checks.items():
            failed = tuple(o.id for o in outcomes if o.status == "fail")
            passed = any(o.status == "pass" for o in outcomes)
            verdicts[group] = ("fail" if failed else "pass" if passed else "skip", failed)
        return verdicts

    @property
    def not_instrumented(self) -> tuple[str, ...]:
        """The checks the target's missing instrumentation left unmeasured."""
        return tuple(o.id for o in self.outcomes if not o.instrumented)

    @property
    def ok(self) -> bool:
        return self.count("fail") == 0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1
