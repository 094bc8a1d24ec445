"""`run_conformance(options) -> ConformReport`: select the catalogue's checks, measure the
phases they need (phases.py), then judge each check on the observations it declared.

Usage mistakes (an unknown `only` group or `skip` id) raise OptionError before any request
(bad option values already did, when the options were built); an endpoint that does not
answer raises TargetError. A check that crashes is a failed check whose evidence names the
exception, so one bug never hides the other checks' results.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import datetime, timezone

from zqbench.conform import hung, phases
from zqbench.conform.catalogue import CATALOGUE, groups, in_groups
from zqbench.conform.context import Sender, Target
from zqbench.conform.model import Check, CheckOutcome, CheckResult, ConformReport
from zqbench.conform.observations import Observations
from zqbench.conform.options import ConformOptions
from zqbench.errors import OptionError
from zqbench.redact import redact_url
from zqbench.target import control
from zqbench.target.resolve import TIMEOUT_S as RESOLVE_TIMEOUT_S
from zqbench.target.resolve import Access, Resolution, Wanted, resolve_target
from zqbench.transport.origin import parse_base_url

NoteCallback = Callable[[str], None]


def select(options: ConformOptions) -> list[tuple[Check, str | None]]:
    """Each check with None (run it) or the reason it is not run; OptionError on bad names."""
    valid_groups = groups()
    for g in options.only:
        if g not in valid_groups:
            problem = f"unknown group; valid: {', '.join(valid_groups)}"
            raise OptionError("only", problem, value=repr(g))
    ids = [c.id for c in CATALOGUE]
    for i in options.skip:
        if i not in ids:
            raise OptionError("skip", f"unknown check id; valid: {', '.join(ids)}", value=repr(i))

    def why_not(check: Check) -> str | None:
        if check.id in options.skip:
            return "skipped with --skip"
        return None if in_groups(check, options.only) else "not in the --only groups"

    return [(check, why_not(check)) for check in CATALOGUE]


def _resolve(options: ConformOptions, base: str, on_note: NoteCallback | None) -> Target:
    """The model (--model, else GET /v1/models) and the APIs (--api, else every one that
    answers, anthropic first), resolved as a run resolves them (zqbench.target.resolve)."""
    timeout_s = min(options.timeout_s, RESOLVE_TIMEOUT_S)
    access = Access(base, api_key=options.api_key, timeout_s=timeout_s)
    wanted = Wanted(model=options.model, apis=options.apis, strict_model=options.strict_model)
    resolution: Resolution = resolve_target(access, wanted)
    if on_note is not None:
        warnings = (f"warning: {w}" for w in resolution.warnings)
        for line in (f"target: {resolution.record.describe()}", resolution.model_note, *warnings):
            if line:
                on_note(line)
    return Target(dataclasses.replace(options, apis=resolution.apis), resolution.model)


def judge(check: Check, obs: Observations) -> CheckResult:
    """`check` on the observations it declared (only those: Observations.view)."""
    try:
        return check.run(obs.view(check.needs))
    except Exception as exc:  # a bug in a check must not hide the others
        return CheckResult(
            "fail", f"the check crashed: {type(exc).__name__}: {exc}"[:300], {"crash": True}
        )


def _charges(plan: list[tuple[Check, str | None]], seconds: dict[str, float]) -> list[float]:
    """Each check's share of the measuring: a phase's seconds go to the first check (in
    catalogue order) whose needs call for it, as the report's `duration_s` says."""
    charged: set[str] = set()
    out = []
    for check, not_run in plan:
        mine = set() if not_run else phases.closure(check.needs) - charged
        charged |= mine
        out.append(sum(seconds.get(name, 0.0) for name in mine))
    return out


def _unmeasured(check: Check, reason: str, stopped_at: str) -> tuple[CheckResult, str]:
    """A check whose phases were not measured, the target having stopped answering or the
    run's bound having passed: the first fails with the reason, so that conform never passes
    such a target; the rest skip, pointing to it. Also returns the id of the check that
    failed."""
    if stopped_at:
        return CheckResult("skip", hung.not_run(stopped_at, reason)), stopped_at
    return CheckResult("fail", reason, hung.evidence(reason)), check.id


def run_conformance(
    options: ConformOptions,
    on_result: Callable[[CheckOutcome], None] | None = None,
    *,
    on_note: NoteCallback | None = None,
) -> ConformReport:
    """`on_note` gets the resolved target's lines (model, APIs), then the phases measured."""
    plan = select(options)
    base = parse_base_url(options.target).url("")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    t0 = time.monotonic()
    control.check_reachable(base, timeout_s=min(options.timeout_s, 5.0))
    target = _resolve(options, base, on_note)
    sender = Sender(target, deadline=t0 + options.duration_bound_s)
    try:
        needs = (name for check, not_run in plan if not not_run for name in check.needs)
        planned = phases.planned(needs)
        if on_note is not None and planned:  # the verdicts come once all is measured
            on_note(f"measuring: {', '.join(p.name for p in planned)}")
        obs, seconds = phases.measure(sender, planned)
    finally:
        sender.close()
    outcomes = []
    stopped_at = ""  # the check that failed for a target that stopped answering
    for (check, not_run), charge in zip(plan, _charges(plan, seconds), strict=True):
        t = time.monotonic()
        if not_run:
            result = CheckResult("skip", not_run)
        elif obs.stopped and not obs.measured(phases.closure(check.needs)):
            result, stopped_at = _unmeasured(check, obs.stopped, stopped_at)
        else:
            result = judge(check, obs)
        outcome = CheckOutcome.of(check, result, round(time.monotonic() - t + charge, 3))
        outcomes.append(outcome)
        if on_result is not None:
            on_result(outcome)
    settings = dataclasses.asdict(target.options)
    for private in ("target", "api_key", "only", "skip"):
        settings.pop(private)
    return ConformReport(
        target=redact_url(options.target),
        apis=target.options.apis,
        model=target.model,
        started_at=started,
        duration_s=round(time.monotonic() - t0, 3),
        outcomes=tuple(outcomes),
        options=settings,
    )
