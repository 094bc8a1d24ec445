"""junit.xml: one testsuite, one testcase per SLO, plus a "run validity" testcase.

    pass          -> a plain testcase
    fail          -> <failure type="slo_failed">
    inconclusive  -> <failure type="slo_inconclusive"> or <skipped> (inconclusive_as)
    invalid run   -> the "run validity" testcase carries <error type="invalid_run">

A renderer of the (redacted) Summary, built with xml.etree (always well-formed XML).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

from zqbench.outputs.json_out import redacted, write_atomic
from zqbench.summary import Summary

InconclusiveAs = Literal["failure", "skipped"]


def render_junit(summary: Summary, *, inconclusive_as: InconclusiveAs = "failure") -> str:
    """The junit.xml text of a summary."""
    if inconclusive_as not in ("failure", "skipped"):
        raise ValueError(f"inconclusive_as must be 'failure' or 'skipped', not {inconclusive_as!r}")
    summary = redacted(summary)
    scenario = summary.scenario.name
    classname = f"zqbench.{scenario}"
    suite = ET.Element("testsuite", name=f"zqbench {scenario}")
    properties = ET.SubElement(suite, "properties")
    facts = {
        "verdict": summary.verdict,
        "target": summary.target,
        "api": summary.api,
        "started_at": summary.started_at,
    }
    for name, value in facts.items():
        ET.SubElement(properties, "property", name=name, value=value)

    failures = errors = skipped = 0
    validity = summary.validity
    case = ET.SubElement(suite, "testcase", name="run validity", classname=classname)
    case.set("time", f"{summary.duration:.3f}")
    if not validity.ok:
        errors += 1
        error = ET.SubElement(
            case, "error", type="invalid_run", message="; ".join(validity.reasons)
        )
        error.text = "\n".join(validity.reasons)

    for slo in summary.slos:
        case = ET.SubElement(suite, "testcase", name=slo.expr, classname=classname)
        case.set("time", "0")
        if slo.verdict == "fail":
            failures += 1
            element = ET.SubElement(case, "failure", type="slo_failed", message=slo.message)
            element.text = slo.message
        elif slo.verdict == "inconclusive" and inconclusive_as == "failure":
            failures += 1
            element = ET.SubElement(case, "failure", type="slo_inconclusive", message=slo.message)
            element.text = slo.message
        elif slo.verdict == "inconclusive":
            skipped += 1
            ET.SubElement(case, "skipped", message=slo.message)
        ET.SubElement(case, "system-out").text = slo.message

    suite.set("tests", str(1 + len(summary.slos)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{summary.duration:.3f}")
    suite.set("timestamp", summary.started_at)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(
    summary: Summary, path: Path, *, inconclusive_as: InconclusiveAs = "failure"
) -> Path:
    return write_atomic(Path(path), render_junit(summary, inconclusive_as=inconclusive_as))
