"""What `zqbench conform` shows: conform.json, junit.xml (written by zqbench.outputs.registry),
and the terminal table.

JSON (`"schema": "zqbench.conform/1"`, docs/conform-schema.md) is the saved result; the
others are views of it. Every output goes through `redact`, so no secret reaches a file.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from zqbench.conform.model import CheckOutcome, ConformReport
from zqbench.outputs.junit import Case, Suite, render_suite
from zqbench.redact import redact
from zqbench.summary import json_number

SCHEMA = "zqbench.conform/1"
EVIDENCE_CHARS = 4000  # of evidence in a JUnit failure message body


def to_dict(report: ConformReport) -> dict[str, Any]:
    doc = {
        "schema": SCHEMA,
        "target": report.target,
        "apis": list(report.apis),
        "model": report.model,
        "started_at": report.started_at,
        "duration_s": report.duration_s,
        "summary": {
            "ok": report.ok,
            "pass": report.count("pass"),
            "fail": report.count("fail"),
            "skip": report.count("skip"),
            "not_instrumented": list(report.not_instrumented),
            "groups": {group: verdict for group, (verdict, _) in report.groups.items()},
        },
        "options": report.options,
        "checks": [
            {
                "id": o.id,
                "group": o.group,
                "statement": o.statement,
                "kind": o.kind,
                "status": o.status,
                "reason": o.reason,
                "evidence": _finite(o.evidence),
                "duration_s": o.duration_s,
            }
            for o in report.outcomes
        ],
    }
    return redact(doc)


def _finite(value: Any) -> Any:
    """JSON has no inf or NaN: a check's evidence (a ratio over 0, a timeout's inf) says
    "inf" / "-inf" as summary.json does, and NaN becomes null."""
    if isinstance(value, float):
        return json_number(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(report: ConformReport) -> str:
    return json.dumps(to_dict(report), indent=2, allow_nan=False, default=str) + "\n"


def render_junit(report: ConformReport) -> str:
    """One testsuite, one testcase per check: <failure> with the evidence, <skipped> with why."""
    doc = to_dict(report)
    cases = []
    for check in doc["checks"]:
        case = Case(
            f"{check['id']}: {check['statement']}",
            f"zqbench.conform.{check['group']}",
            f"{check['duration_s']:.3f}",
        )
        if check["status"] == "fail":
            evidence = json.dumps(check["evidence"], indent=2, default=str)[:EVIDENCE_CHARS]
            case = replace(case, outcome="failure", kind="nonconformance", text=evidence)
            case = replace(case, message=check["reason"])
        elif check["status"] == "skip":
            case = replace(case, outcome="skipped", message=check["reason"])
        else:
            case = replace(case, stdout=check["reason"])
        cases.append(case)
    properties = tuple((name, str(doc[name])) for name in ("target", "model", "started_at"))
    properties += (("apis", ",".join(doc["apis"])),)
    duration = f"{doc['duration_s']:.3f}"
    return render_suite(
        Suite("zqbench conform", properties, tuple(cases), duration, doc["started_at"])
    )


_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "skip"}


def format_line(outcome: CheckOutcome) -> str:
    """One row of the terminal table: status, id, and the reason (or the statement)."""
    text = outcome.reason or outcome.statement
    return f"{_MARK[outcome.status]:<5} {outcome.id:<16} {text[:110]}"


def format_groups(report: ConformReport) -> str:
    """Each group's verdict on one line, its failed checks named: `by group: zeroqueue FAIL
    (zeroqueue.7), errors PASS, ...`, so that whether the endpoint is zero-queue reads apart
    from how well it speaks its API."""
    shown = [
        f"{group} {_MARK[verdict]}" + (f" ({', '.join(failed)})" if failed else "")
        for group, (verdict, failed) in report.groups.items()
    ]
    return "by group: " + ", ".join(shown)


def format_summary(report: ConformReport) -> str:
    """The table's last lines: each group's verdict, then the counts, the time, the target;
    first, when the target lacks the reference server's instrumentation, which checks that
    left unmeasured."""
    lines = [
        format_groups(report),
        f"{report.count('pass')} passed, {report.count('fail')} failed, "
        f"{report.count('skip')} skipped in {report.duration_s:.1f} s ({report.target})",
    ]
    missing = report.not_instrumented
    if missing and not report.options.get("require_instrumentation"):
        lines.insert(
            0,
            f"not instrumented: {', '.join(missing)} unmeasured, the verdict rests on "
            "behaviour (--require-instrumentation fails them)",
        )
    return "\n".join(lines)
