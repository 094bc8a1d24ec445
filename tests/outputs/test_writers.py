"""summary.json, summary.md and junit.xml from a real summary; output folder names."""

from __future__ import annotations

import json
import os
import stat
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from zqbench.errors import UsageError
from zqbench.outputs.json_out import load_summary, write_summary
from zqbench.outputs.junit import render_junit
from zqbench.outputs.paths import default_out_dir, make_out_dir, scenario_slug
from zqbench.outputs.render import render_summary_md

from .conftest import make_summary

SLOS = ["latency:p99<2s", "latency:p99<500ms", "latency:p99<992ms"]  # pass, fail, inconclusive


def test_summary_json_round_trip_without_secrets(tmp_path: Path) -> None:
    """summary.json is written atomically, parses back, and holds no API key."""
    summary = make_summary(SLOS)
    path = write_summary(summary, tmp_path / "summary.json")
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temp file left
    text = path.read_text()
    assert "sk-ant-secret" not in text
    loaded = load_summary(path)
    assert loaded.schema_id == "zqbench.summary/1"
    assert loaded.scenario.config["headers"]["x-api-key"] == "<redacted>"
    assert loaded.metrics["latency"].p99 == pytest.approx(0.99)
    assert loaded.to_json() == text  # read back, it writes the same bytes


def test_summary_json_refuses_nan(tmp_path: Path) -> None:
    """A NaN never reaches summary.json (it would mean a silent 'no value')."""
    summary = make_summary(SLOS).model_copy(update={"duration": float("nan")})
    with pytest.raises(ValueError):
        write_summary(summary, tmp_path / "summary.json")
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "unreadable (Expecting property name enclosed in double quotes:"),
        ('{"schema": "zqbench.summary/0"}', "schema 'zqbench.summary/0', expected"),
        ("[]", "not a summary (a JSON list, not an object)"),
        (
            '{"schema": "zqbench.summary/1", "verdict": "pass"}',
            "not a valid zqbench.summary/1 file: scenario: Field required (and 20 more)",
        ),
    ],
)
def test_a_bad_summary_json_is_one_usage_error(tmp_path: Path, text: str, problem: str) -> None:
    """Unreadable, another version, or not the schema: exit 2 with one line naming the file."""
    path = tmp_path / "summary.json"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_summary(path)
    assert info.value.message.startswith(f"{path}: {problem}")
    assert "\n" not in info.value.message


def test_summary_json_with_a_wrong_value_names_its_place(tmp_path: Path) -> None:
    data = json.loads(make_summary(SLOS).to_json())
    data["metrics"]["latency"]["p99"] = "fast"
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        UsageError,
        match=r"summary.json: not a valid zqbench.summary/1 file: "
        r"metrics\.latency\.p99\.float: Input should be a valid number",
    ):
        load_summary(path)


def test_junit_one_testcase_per_slo() -> None:
    """Parsed back by xml.etree: validity case + one case per SLO, failures where due."""
    summary = make_summary(SLOS)
    root = ET.fromstring(render_junit(summary))
    assert root.tag == "testsuite"
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert list(cases) == ["run validity", *SLOS]
    assert cases["run validity"].find("error") is None
    assert cases["latency:p99<2s"].find("failure") is None
    assert cases["latency:p99<500ms"].find("failure").get("type") == "slo_failed"
    inconclusive = cases["latency:p99<992ms"].find("failure")
    assert inconclusive.get("type") == "slo_inconclusive"
    assert "more samples would decide" in inconclusive.get("message")
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "0")


def test_junit_inconclusive_as_skipped() -> None:
    """inconclusive_as='skipped' turns the inconclusive gate into <skipped>."""
    root = ET.fromstring(render_junit(make_summary(SLOS), inconclusive_as="skipped"))
    case = next(c for c in root.iter("testcase") if c.get("name") == "latency:p99<992ms")
    assert case.find("failure") is None
    assert case.find("skipped") is not None
    assert (root.get("failures"), root.get("skipped")) == ("1", "1")


def test_junit_invalid_run_is_an_error() -> None:
    """A lagging generator: the run validity testcase carries an error with the reason."""
    root = ET.fromstring(render_junit(make_summary(["latency:p99<2s"], lag_ms=20)))
    error = next(root.iter("testcase")).find("error")
    assert error is not None and error.get("type") == "invalid_run"
    assert "schedule_lag p99 = 20 ms > 10 ms" in error.get("message")
    assert root.get("errors") == "1"


def test_summary_md_content() -> None:
    """Verdict line, SLO table with verdicts, per-stage latency rows, status mix."""
    summary = make_summary(SLOS, failures=10)
    text = render_summary_md(summary)
    first = text.splitlines()[0]
    assert first == "## zqbench: ❌ FAIL · `burst` → `http://127.0.0.1:8000/v1`"
    assert "1,000 requests sent: ok 990, failed 10 in 10.0 s" in text  # no outcomes judged
    assert "| `latency:p99<2s` | ✅ PASS |" in text
    assert "| `latency:p99<500ms` | ❌ FAIL |" in text
    assert "| `latency:p99<992ms` | ⚠️ INCONCLUSIVE |" in text
    assert "| `latency` | stage 0 (warm) | 490 |" in text
    assert "| `latency` | stage 1 (burst) | 500 |" in text
    assert "| `503` | 10 | 1.00% |" in text
    assert "`server_queue`: the target sent no" in text
    assert "sk-ant" not in text


def test_summary_md_invalid_run_lists_reasons() -> None:
    text = render_summary_md(make_summary([], lag_ms=20))
    assert text.startswith("## zqbench: 🚫 INVALID")
    assert "- the generator fell behind its schedule: schedule_lag p99 = 20 ms > 10 ms" in text


def test_summary_md_error_adjusted_infinity() -> None:
    """An error-adjusted percentile landing on a failure shows as ∞, not a number."""
    text = render_summary_md(make_summary([], failures=20))
    row = next(
        line for line in text.splitlines() if line.startswith("| `latency_error_adjusted` | all")
    )
    assert row.endswith("| ∞ | ∞ | ∞ |")


def test_default_out_dir_name() -> None:
    now = datetime(2026, 11, 29, 10, 45, 1, tzinfo=timezone.utc)
    assert default_out_dir("burst", now=now) == Path("reports/20261129T104501Z-burst")
    assert scenario_slug("scenarios/packet loss.toml") == "packet-loss"


def test_make_out_dir(tmp_path: Path) -> None:
    """--out is used as given; the default folder is never reused within one second."""
    now = datetime(2026, 11, 29, 10, 45, 1, tzinfo=timezone.utc)
    first = make_out_dir(None, "burst", now=now, root=tmp_path)
    second = make_out_dir(None, "burst", now=now, root=tmp_path)
    assert first.name == "20261129T104501Z-burst"
    assert second.name == "20261129T104501Z-burst-2"
    chosen = make_out_dir(tmp_path / "mine", "burst")
    assert chosen == tmp_path / "mine" and chosen.is_dir()
    assert make_out_dir(tmp_path / "mine", "burst") == chosen


def test_json_summary_matches_markdown_numbers(tmp_path: Path) -> None:
    """The renderers read the saved summary: re-rendering from JSON gives the same page."""
    summary = make_summary(SLOS)
    loaded = load_summary(write_summary(summary, tmp_path / "s.json"))
    assert render_summary_md(loaded) == render_summary_md(summary)


@pytest.mark.parametrize(
    "planted", ["samples.w1.arrows", "samples.parquet", "summary.json", "samples.w0.arrows"]
)
def test_out_that_holds_a_run_is_refused(tmp_path: Path, planted: str) -> None:
    """Reusing --out would merge another run's samples into this one: refused, exit 2."""
    out = tmp_path / "old-run"
    out.mkdir()
    (out / planted).write_bytes(b"from an earlier run")
    with pytest.raises(UsageError) as err:
        make_out_dir(out, "burst")
    assert err.value.message == (
        f"--out {out}: already holds a run's files ({planted}); "
        "choose another --out or remove that folder"
    )
    assert (out / planted).read_bytes() == b"from an earlier run", "nothing was moved or removed"


def test_out_that_cannot_be_created_is_a_usage_error(tmp_path: Path) -> None:
    """An --out below a file (or on a read-only disk) is the user's to fix: exit 2, one line."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(UsageError) as err:
        make_out_dir(blocker / "run", "burst")
    assert err.value.message == f"--out {blocker / 'run'}: cannot write there (Not a directory)"


@pytest.mark.slow
def test_every_output_file_has_the_same_mode(tmp_path: Path) -> None:
    """One policy: every file a run writes is 0666 less the umask, as any file the user makes."""
    from zqbench.outputs.registry import RunOutput, write_run

    from .conftest import make_samples_frame

    old = os.umask(0o022)
    try:
        run = RunOutput(make_summary(SLOS), make_samples_frame)
        written = write_run(tmp_path, run)
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in written}
    assert modes and set(modes.values()) == {0o644}, modes
