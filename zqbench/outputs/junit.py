"""junit.xml, the one JUnit writer: `Suite` and `Case` rendered by `render_suite`.

A run's suite has one testcase per SLO, plus a "run validity" testcase (`zqbench conform`
builds its own suite of checks in zqbench.outputs.conform, rendered here too):

    pass          -> a plain testcase
    fail          -> <failure type="slo_failed">
    inconclusive  -> <failure type="slo_inconclusive"> or <skipped> (inconclusive_as)
    invalid run   -> the "run validity" testcase carries <error type="invalid_run">

Built with xml.etree: always well-formed XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from typing import Literal

from zqbench.outputs.json_out import redacted
from zqbench.printable import escaped, escaped_lines, one_line
from zqbench.summary import Summary

InconclusiveAs = Literal["failure", "skipped"]
TestcaseResult = Literal["pass", "failure", "error", "skipped"]


@dataclass(frozen=True, slots=True)
class Case:
    """One <testcase>: its outcome element (`<failure>`, `<error>`, `<skipped>`, or none for a
    pass) with `kind` and `message`, the element's `text`, and an optional <system-out>."""

    name: str
    classname: str
    time: str
    outcome: TestcaseResult = "pass"
    kind: str = ""  # the type attribute of <failure> or <error>
    message: str = ""
    text: str | None = None
    stdout: str | None = None


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    properties: tuple[tuple[str, str], ...]
    cases: tuple[Case, ...]
    time: str
    timestamp: str


def render_suite(suite: Suite) -> str:
    """The JUnit XML text of one suite; the counts come from the cases' outcomes. Text may
    hold a target's words: a one-line field (an attribute) is escaped and cut as a line is
    (`one_line`: a 100 kB model id stays out), a block (an element's text) escaped line by
    line. XML 1.0 forbids most control characters, which
    ElementTree would write anyway, and a CI would show a newline in a message as a line
    of its own."""
    root = ET.Element("testsuite", name=one_line(suite.name))
    properties = ET.SubElement(root, "properties")
    for name, value in suite.properties:
        ET.SubElement(properties, "property", name=one_line(name), value=one_line(value))
    for case in suite.cases:
        names = {"name": one_line(case.name), "classname": one_line(case.classname)}
        element = ET.SubElement(root, "testcase", {**names, "time": case.time})
        if case.outcome in ("failure", "error"):
            message = one_line(case.message)
            outcome = ET.SubElement(element, case.outcome, type=case.kind, message=message)
            outcome.text = None if case.text is None else escaped_lines(case.text)
        elif case.outcome == "skipped":
            ET.SubElement(element, "skipped", message=one_line(case.message))
        if case.stdout is not None:
            ET.SubElement(element, "system-out").text = escaped_lines(case.stdout)
    outcomes = [case.outcome for case in suite.cases]
    root.set("tests", str(len(outcomes)))
    root.set("failures", str(outcomes.count("failure")))
    root.set("errors", str(outcomes.count("error")))
    root.set("skipped", str(outcomes.count("skipped")))
    root.set("time", suite.time)
    root.set("timestamp", suite.timestamp)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def summary_suite(summary: Summary, *, inconclusive_as: InconclusiveAs = "failure") -> Suite:
    """A run's suite: the run's validity, then one case per SLO (of the redacted summary)."""
    if inconclusive_as not in ("failure", "skipped"):
        raise ValueError(f"inconclusive_as must be 'failure' or 'skipped', not {inconclusive_as!r}")
    summary = redacted(summary)
    classname, duration = f"zqbench.{summary.scenario.name}", f"{summary.duration:.3f}"
    validity = Case("run validity", classname, duration)
    if not summary.validity.ok:
        reasons = summary.validity.reasons
        text = "\n".join(escaped(reason) for reason in reasons)
        message = "; ".join(reasons)
        validity = replace(
            validity, outcome="error", kind="invalid_run", message=message, text=text
        )
    cases = [validity]
    for slo in summary.slos:
        case = Case(slo.expr, classname, "0", stdout=slo.message)
        if slo.verdict == "fail":
            case = replace(case, outcome="failure", kind="slo_failed", message=slo.message)
            case = replace(case, text=slo.message)
        elif slo.verdict == "inconclusive" and inconclusive_as == "failure":
            case = replace(case, outcome="failure", kind="slo_inconclusive", message=slo.message)
            case = replace(case, text=slo.message)
        elif slo.verdict == "inconclusive":
            case = replace(case, outcome="skipped", message=slo.message)
        cases.append(case)
    facts = (
        ("verdict", summary.verdict),
        ("target", summary.target),
        ("api", summary.api),
        ("started_at", summary.started_at),
    )
    return Suite(
        f"zqbench {summary.scenario.name}", facts, tuple(cases), duration, summary.started_at
    )


def render_junit(summary: Summary, *, inconclusive_as: InconclusiveAs = "failure") -> str:
    """The junit.xml text of a summary."""
    return render_suite(summary_suite(summary, inconclusive_as=inconclusive_as))
