"""junit.xml: one testsuite, one testcase per SLO, plus a "run validity" testcase.

    pass          -> a plain testcase
    fail          -> <failure type="slo_failed">
    inconclusive  -> <failure type="slo_inconclusive"> or <skipped> (inconclusive_as)
    invalid run   -> the "run validity" testcase carries <error type="invalid_run">

A renderer of the saved summary dict, built with xml.etree (always well-formed XML).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from zqbench.outputs.json_out import write_atomic
from zqbench.redact import redact

InconclusiveAs = Literal["failure", "skipped"]


def render_junit(summary: Mapping[str, Any], *, inconclusive_as: InconclusiveAs = "failure") -> str:
    """The junit.xml text of a summary dict."""
    if inconclusive_as not in ("failure", "skipped"):
        raise ValueError(f"inconclusive_as must be 'failure' or 'skipped', not {inconclusive_as!r}")
    summary = redact(dict(summary))
    scenario = summary["scenario"]["name"]
    classname = f"zqbench.{scenario}"
    suite = ET.Element("testsuite", name=f"zqbench {scenario}")
    properties = ET.SubElement(suite, "properties")
    for name in ("verdict", "target", "api", "started_at"):
        ET.SubElement(properties, "property", name=name, value=str(summary.get(name)))

    failures = errors = skipped = 0
    validity = summary["validity"]
    case = ET.SubElement(suite, "testcase", name="run validity", classname=classname)
    case.set("time", f"{summary['duration']:.3f}")
    if not validity["ok"]:
        errors += 1
        error = ET.SubElement(
            case, "error", type="invalid_run", message="; ".join(validity["reasons"])
        )
        error.text = "\n".join(validity["reasons"])

    for slo in summary["slos"]:
        case = ET.SubElement(suite, "testcase", name=slo["expr"], classname=classname)
        case.set("time", "0")
        verdict = slo["verdict"]
        if verdict == "fail":
            failures += 1
            element = ET.SubElement(case, "failure", type="slo_failed", message=slo["message"])
            element.text = slo["message"]
        elif verdict == "inconclusive" and inconclusive_as == "failure":
            failures += 1
            element = ET.SubElement(
                case, "failure", type="slo_inconclusive", message=slo["message"]
            )
            element.text = slo["message"]
        elif verdict == "inconclusive":
            skipped += 1
            ET.SubElement(case, "skipped", message=slo["message"])
        ET.SubElement(case, "system-out").text = slo["message"]

    suite.set("tests", str(1 + len(summary["slos"])))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{summary['duration']:.3f}")
    suite.set("timestamp", str(summary["started_at"]))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(
    summary: Mapping[str, Any], path: Path, *, inconclusive_as: InconclusiveAs = "failure"
) -> Path:
    return write_atomic(Path(path), render_junit(summary, inconclusive_as=inconclusive_as))
