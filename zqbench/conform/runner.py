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

from zqbench import control
from zqbench.conform.catalogue import CATALOGUE, groups, in_groups
from zqbench.conform.context import Context
from zqbench.conform.model import Check, CheckOutcome, CheckResult, ConformReport
from zqbench.conform.options import ConformOptions
from zqbench.errors import OptionError
from zqbench.redact import redact_url

FALLBACK_MODEL = "zq-reference"


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


def _discover_model(ctx: Context) -> str:
    """--model, else the first id of GET /v1/models, else the reference server's name."""
    if ctx.options.model:
        return ctx.options.model
    obj = ctx.send(ctx.get("/v1/models")).json()
    data = obj.get("data") if isinstance(obj, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        model = data[0].get("id")
        if isinstance(model, str) and model:
            return model
    return FALLBACK_MODEL


def _run_one(check: Check, ctx: Context) -> CheckResult:
    try:
        return check.run(ctx)
    except Exception as exc:  # a bug in a check must not hide the others
        return CheckResult(
            "fail", f"the check crashed: {type(exc).__name__}: {exc}"[:300], {"crash": True}
        )


def run_conformance(
    options: ConformOptions, on_result: Callable[[CheckOutcome], None] | None = None
) -> ConformReport:
    plan = select(options)
    ctx = Context(options)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    t0 = time.monotonic()
    control.check_reachable(ctx.base, timeout_s=min(options.timeout_s, 5.0))
    outcomes = []
    try:
        ctx.model = _discover_model(ctx)
        for check, not_run in plan:
            t = time.monotonic()
            result = CheckResult("skip", not_run) if not_run else _run_one(check, ctx)
            outcome = CheckOutcome.of(check, result, round(time.monotonic() - t, 3))
            outcomes.append(outcome)
            if on_result is not None:
                on_result(outcome)
    finally:
        ctx.close()
    settings = dataclasses.asdict(options)
    for private in ("target", "api_key", "only", "skip"):
        settings.pop(private)
    return ConformReport(
        target=redact_url(options.target),
        apis=options.apis,
        model=ctx.model,
        started_at=started,
        duration_s=round(time.monotonic() - t0, 3),
        outcomes=tuple(outcomes),
        options=settings,
    )
