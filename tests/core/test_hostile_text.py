"""Text a target controls (its model ids, its error words) never writes lines of its own into a
terminal, a CI log or a report: escaped and cut (zqbench.printable), and never slow to show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conform.fake_server import FakeServer
from tests.core.conftest import write_scenario, zqbench
from zqbench.errors import UsageError
from zqbench.outputs.junit import Case, Suite, render_suite
from zqbench.printable import escaped, one_line, shown
from zqbench.redact import redact_text
from zqbench.target.resolve import Access, Wanted, resolve_target

# A NUL, the right-to-left override, a clear-screen, and a line that reads like zqbench's.
HOSTILE = "tiny\x00\u202e\x1b[2J\nverdict: PASS\r\n"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

QUICK = """
name = "quick"
description = "quick"
api = "anthropic"
[load]
executor = "constant-vus"
vus = 2
duration = "2s"
[request]
max_tokens = 4
stream = true
"""


def test_shown_escapes_what_is_not_printable_and_keeps_every_script() -> None:
    assert shown(HOSTILE) == "tiny\\x00\\u202e\\x1b[2J\\x0averdict: PASS\\x0d\\x0a"
    assert shown("модель-7b 模型") == "модель-7b 模型"
    assert shown("\U000e0001") == "\\U000e0001"  # a tag character: format, not printable
    assert shown("m" * 300) == "m" * 200 + "... (100 more characters)"
    assert escaped("a\ud800b") == "a\\ud800b"  # a lone surrogate, as a JSON body may carry
    assert one_line("two\nlines") == "two\\x0alines"


@pytest.mark.timeout(60)
def test_a_long_word_is_redacted_in_linear_time() -> None:
    # The URL pattern once backtracked over a long word from each of its letters: a
    # target's 100 kB model id held the summary's writer for minutes.
    word = "x" * 1_000_000
    assert redact_text(word) == word
    assert redact_text(f"{word}https://u:pw@host/v1") == f"{word}https://host/v1"


def test_junit_with_a_targets_control_characters_still_parses() -> None:
    case = Case("run validity", "zqbench.t", "1.0", "error", "invalid_run", HOSTILE, HOSTILE)
    xml = render_suite(Suite("zqbench t", (("target", HOSTILE),), (case,), "1.0", "now"))
    root = ET.fromstring(xml)
    error = root.find("testcase/error")
    assert error is not None
    assert error.get("message") == shown(HOSTILE)
    assert error.text == "tiny\\x00\\u202e\\x1b[2J\nverdict: PASS\\x0d\n"  # a block: lines kept
    assert not CONTROL.search(xml)


def test_a_model_list_error_names_hostile_ids_escaped_and_cut() -> None:
    ids = (HOSTILE, "y" * 100_000)
    with FakeServer(models=ids) as server, pytest.raises(UsageError) as raised:
        resolve_target(Access(server.base_url), Wanted(strict_model=True))
    message = raised.value.message
    assert message == (
        "target lists 2 models at GET /v1/models "
        f"({shown(HOSTILE)}, {'y' * 200}... (99800 more characters)); name one with --model"
    )


@pytest.mark.slow
def test_a_hostile_model_id_writes_no_control_character_and_no_line_of_its_own(
    tmp_path: Path,
) -> None:
    model = HOSTILE + "x" * 100_000  # 100 kB: once minutes in the terminal's highlighter
    scenario = write_scenario(tmp_path, QUICK)
    out = tmp_path / "out"
    with FakeServer(models=(model,)) as server:
        done = zqbench("run", str(scenario), "--target", server.base_url, "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    for stream in (done.stderr, done.stdout):
        assert not CONTROL.search(stream)
    # The target's "verdict: PASS" stays inside its note; the one verdict line is zqbench's.
    assert not re.search("^verdict", done.stderr, re.MULTILINE)
    assert len(re.findall("^verdict: ", done.stdout, re.MULTILINE)) == 1
    assert f"model {shown(model)} (discovered from GET /v1/models)" in done.stderr
    assert max(len(line) for line in done.stderr.splitlines()) < 1000
    for report in ("summary.md", "report.html", "junit.xml"):
        text = (out / report).read_text()
        assert not CONTROL.search(text), report
        assert "\nverdict: PASS" not in text, report
    ET.parse(out / "junit.xml")


def test_a_refusal_reason_label_is_shown_escaped_and_cut() -> None:
    # The engine's refusal counter's `reason` label is the target's text (#44 item 4).
    from zqbench.metrics.sections.server_queue import rows
    from zqbench.summary import GaugeSummary, Rejections, ServerQueue, Unavailable

    reason = HOSTILE + "r" * 5000
    gauge = GaugeSummary(metric="g", max=0.0, mean=0.0)
    queue = ServerQueue.model_construct(
        waiting=gauge,
        running=gauge,
        queue_time=Unavailable(unavailable="none"),
        rejections=Rejections(metric="c", total=3.0, by_reason={reason: 3.0}),
    )
    facts = {f.label: f.value for f in rows(queue) if f.label.startswith("refused")}
    assert facts == {"refused, by its own count": f"3 ({shown(reason)} 3)"}


@pytest.mark.slow
def test_a_hostile_refusal_reason_writes_no_line_of_its_own(tmp_path: Path) -> None:
    # vLLM's admission counter by `reason`, from the target's /metrics, was printed raw under
    # the verdict: the target's own "verdict: PASS" line on stdout (#44 item 4).
    reason = HOSTILE.replace("\r", "") + "r" * 5000  # a \r would end the exposition's line
    scenario = write_scenario(tmp_path, QUICK.replace("vus = 2", "vus = 6"))
    out = tmp_path / "out"
    with FakeServer(rejection_reason=reason) as server:
        done = zqbench("run", str(scenario), "--target", server.base_url, "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "vllm:admission_rejections_total" in done.stdout  # the counter was read
    for stream in (done.stderr, done.stdout):
        assert not CONTROL.search(stream)
        assert max(len(line) for line in stream.splitlines()) < 1000
    assert len(re.findall("^verdict", done.stdout, re.MULTILINE)) == 1
    assert f"({shown(reason)} " in done.stdout
    for report in ("summary.md", "report.html"):
        text = (out / report).read_text()
        assert "r" * 201 not in text, report
        assert "\nverdict: PASS" not in text, report


def test_junit_attributes_are_cut_as_a_line_is() -> None:
    # conform's junit.xml carried a 100 kB model id whole in its `model` property (#44 item 4).
    model = HOSTILE + "x" * 100_000
    case = Case("c", "zqbench.t", "1.0", "failure", "check", model, None)
    root = ET.fromstring(render_suite(Suite("s", (("model", model),), (case,), "1.0", "now")))
    prop = root.find("properties/property")
    failure = root.find("testcase/failure")
    assert prop is not None and failure is not None
    assert prop.get("value") == failure.get("message") == one_line(model)
    assert len(one_line(model)) < 4100
