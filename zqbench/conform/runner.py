"""`run_conformance(options) -> ConformReport`: select, run and record the catalogue's checks.

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

from zqbench.conform import hung
from zqbench.conform.catalogue import CATALOGUE, groups, in_groups
from zqbench.conform.context import Context
from zqbench.conform.evidence import Evidence
from zqbench.conform.model import Check, CheckOutcome, CheckResult, ConformReport
from zqbench.conform.options import ConformOptions
from zqbench.errors import OptionError
from zqbench.redact import redact_url
from zqbench.target import control
from zqbench.target.resolve import TIMEOUT_S as RESOLVE_TIMEOUT_S
from zqbench.target.resolve import Access, Resolution, Wanted, resolve_target

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
    out: list[tuple[Check, str | None]] = []
    for check in CATALOGUE:
        if check.id in options.skip:
            out.append((check, "skipped with --skip"))
        elif not in_groups(check, options.only):
            out.append((check, "not in the --only groups"))
        else:
            out.append((check, None))
    return out


def _resolve(ctx: Context, on_note: NoteCallback | None) -> None:
    """The model (--model, else GET /v1/models) and the APIs (--api, else every one that
    answers, anthropic first), resolved as a run resolves them (zqbench.target.resolve)."""
    options = ctx.options
    timeout_s = min(options.timeout_s, RESOLVE_TIMEOUT_S)
    access = Access(ctx.base, api_key=options.api_key, timeout_s=timeout_s)
    wanted = Wanted(model=options.model, apis=options.apis, strict_model=options.strict_model)
    resolution: Resolution = resolve_target(access, wanted)
    ctx.model = resolution.model
    ctx.options = dataclasses.replace(options, apis=resolution.apis)
    if on_note is not None:
        warnings = (f"warning: {w}" for w in resolution.warnings)
        for line in (f"target: {resolution.record.describe()}", resolution.model_note, *warnings):
            if line:
                on_note(line)


def _run_one(check: Check, ctx: Context) -> CheckResult:
    try:
        return check.run(ctx)
    except Exception as exc:  # a bug in a check must not hide the others
        return CheckResult(
            "fail", f"the check crashed: {type(exc).__name__}: {exc}"[:300], {"crash": True}
        )


def _stopped_answering(ctx: Context) -> str | None:
    """zqbench.conform.hung over the exchanges so far, confirmed by one short generation."""

    def confirm() -> Evidence:
        return ctx.send(ctx.generate(ctx.api, stream=True, max_tokens=1))

    return hung.stopped_answering(ctx.seen, confirm, ctx.options.timeout_s)


def run_conformance(
    options: ConformOptions,
    on_result: Callable[[CheckOutcome], None] | None = None,
    *,
    on_note: NoteCallback | None = None,
) -> ConformReport:
    """`on_note` gets the resolved target's lines (model, APIs) before the first check."""
    plan = select(options)
    ctx = Context(options)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    t0 = time.monotonic()
    control.check_reachable(ctx.base, timeout_s=min(options.timeout_s, 5.0))
    outcomes = []
    try:
        _resolve(ctx, on_note)
        load = any(check.id.startswith("zeroqueue.") and not not_run for check, not_run in plan)
        if load:
            # The endpoint at rest, before any heavy check can leave it busy (Context.settle).
            ctx.low_load()
        silent = _stopped_answering(ctx)
        stopped_at = ""  # the check failed for a target that stopped answering
        for check, not_run in plan:
            if not not_run and stopped_at:
                not_run = hung.not_run(stopped_at)
            if load and check.group == "errors" and not not_run and not silent:
                # After the load checks (catalogue order): slots a cut stream still holds
                # (zeroqueue.13) would turn the malformed inputs into refusals. Once only.
                ctx.settle("errors")
            t = time.monotonic()
            if not_run:
                result = CheckResult("skip", not_run)
            elif silent:
                # The first check left fails with the reason, so that conform never passes
                # a target that stopped answering; the others point to it.
                result = CheckResult("fail", silent, {"stopped_answering": True})
                stopped_at = check.id
            else:
                result = _run_one(check, ctx)
                silent = _stopped_answering(ctx)
            outcome = CheckOutcome.of(check, result, round(time.monotonic() - t, 3))
            outcomes.append(outcome)
            if on_result is not None:
                on_result(outcome)
    finally:
        ctx.close()
    settings = dataclasses.asdict(ctx.options)
    for private in ("target", "api_key", "only", "skip"):
        settings.pop(private)
    return ConformReport(
        target=redact_url(options.target),
        apis=ctx.options.apis,
        model=ctx.model,
        started_at=started,
        duration_s=round(time.monotonic() - t0, 3),
        outcomes=tuple(outcomes),
        options=settings,
    )
