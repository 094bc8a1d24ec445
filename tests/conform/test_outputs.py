"""The JSON report (versioned schema) and the JUnit XML, read back by a JUnit parser."""

from __future__ import annotations

import json
from pathlib import Path

from junitparser import Failure, JUnitXml, Skipped, TestSuite

from tests.conform.fake_server import FakeServer
from tests.conform.util import fake_options
from zqbench.conform import run_conformance
from zqbench.conform.catalogue import CATALOGUE
from zqbench.outputs.conform import SCHEMA, format_groups, to_dict
from zqbench.outputs.registry import write_conform

KEY = "sk-conformsecret-0123456789"


def test_junit_and_json_read_back(tmp_path: Path) -> None:
    with FakeServer({"refuse_429"}, api_key=KEY) as srv:
        report = run_conformance(fake_options(srv.base_url, api_key=KEY, expect_auth=True))
    doc_path, junit = write_conform(report, out=tmp_path)
    assert (doc_path.name, junit.name) == ("conform.json", "junit.xml")
    assert write_conform(report, json_path=tmp_path / "c.json", junit=tmp_path / "j.xml") == [
        tmp_path / "c.json",
        tmp_path / "j.xml",
    ]
    assert (tmp_path / "c.json").read_bytes() == doc_path.read_bytes()

    xml = JUnitXml.fromfile(str(junit))
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)  # a bare <testsuite> root
    cases = [case for suite in suites for case in suite]
    assert len(cases) == len(CATALOGUE)
    by_id = {case.name.split(":")[0]: case for case in cases}
    failure = [r for r in by_id["zeroqueue.7"].result if isinstance(r, Failure)]
    assert failure and "429" in failure[0].message
    assert "429" in failure[0].text  # the evidence, not only the reason
    assert any(isinstance(r, Skipped) for r in by_id["http.2"].result)
    assert by_id["errors.6"].is_passed

    doc = json.loads(doc_path.read_text())
    assert doc["schema"] == SCHEMA == "zqbench.conform/1"
    assert [c["id"] for c in doc["checks"]] == [c.id for c in CATALOGUE]
    groups = {
        "api.anthropic": "pass", "api.openai": "pass", "http": "pass", "zeroqueue": "fail",
        "errors": "pass", "headers": "pass",
    }  # fmt: skip
    assert doc["summary"] == {
        "ok": False, "pass": 35, "fail": 1, "skip": 1, "not_instrumented": [], "groups": groups
    }  # fmt: skip
    assert list(doc["summary"]["groups"]) == list(groups)  # the catalogue's order
    assert format_groups(report) == (
        "by group: api.anthropic PASS, api.openai PASS, http PASS, zeroqueue FAIL "
        "(zeroqueue.7), errors PASS, headers PASS"
    )
    assert doc == to_dict(report)
    for text in (junit.read_text(), doc_path.read_text()):
        assert KEY not in text  # the key never reaches an output


def test_evidence_with_inf_or_nan_writes_valid_json(tmp_path: Path) -> None:
    """#25 item 8: a check's evidence may hold inf (a ratio over 0) or NaN; conform.json
    says "inf" and null, as summary.json does, and stays valid JSON."""
    from zqbench.conform.model import CheckOutcome, ConformReport
    from zqbench.outputs.conform import dumps

    outcome = CheckOutcome(
        "zeroqueue.5", "zeroqueue", "statement", "fail", "reason",
        {"ratio": float("inf"), "low": float("-inf"), "median": float("nan"), "ms": [1.5]},
        0.25,
    )  # fmt: skip
    report = ConformReport("http://127.0.0.1:9", ("anthropic",), "m", "t0", 1.0, (outcome,), {})
    text = dumps(report)
    check = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert check["checks"][0]["evidence"] == {
        "ratio": "inf", "low": "-inf", "median": None, "ms": [1.5],
    }  # fmt: skip
    assert check["checks"][0]["duration_s"] == 0.25
    write_conform(report, out=tmp_path)
    junit = (tmp_path / "junit.xml").read_text()
    assert "Infinity" not in junit and "NaN" not in junit
