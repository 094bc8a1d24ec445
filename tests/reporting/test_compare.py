"""`zqbench compare`: known shifts between synthetic runs, CIs of the difference, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.reporting.conftest import uniform_run
from tests.reporting.synth import write_synthetic_run
from zqbench.cli import app
from zqbench.metrics.quantiles import quantile
from zqbench.outputs.render import frame_of
from zqbench.saved.compare import compare_runs
from zqbench.saved.run import load_run

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same 4000 latencies (10..30 ms), shifted by 0, +1 and +2 ms; one with 5% refused."""
    root = tmp_path_factory.mktemp("compare")
    return {
        "base": uniform_run(root / "base", seed=1),
        "same": uniform_run(root / "same", seed=2),
        "plus1": uniform_run(root / "plus1", seed=3, shift_ms=1.0),
        "plus2": uniform_run(root / "plus2", seed=4, shift_ms=2.0),
        "refusing": uniform_run(root / "refusing", seed=5, refused=0.05),
    }


def _diffs(comparison) -> dict[str, object]:
    return {d.key: d for d in comparison.pairs[0].diffs}


def test_known_shift_is_a_regression_and_its_ci_covers_it(runs: dict[str, Path]) -> None:
    """+2 ms on p50 = 19.995 ms is +10%: beyond 5%, and the CI holds the true +2 ms."""
    comparison = compare_runs([runs["base"], runs["plus2"]], max_regression=0.05)
    d = _diffs(comparison)
    p50 = d["latency:p50"]
    assert round(p50.baseline * 1e3, 3) == 19.995
    assert round(p50.diff * 1e3, 3) == 2.0
    assert p50.ci_low <= 0.002 <= p50.ci_high
    assert p50.ci_low > p50.allowed  # the whole interval is beyond the tolerance
    assert p50.verdict == "regression"
    assert d["latency:p99"].verdict == "regression"  # +2 / 29.795 = +6.7%
    assert d["errors:rate"].verdict == "ok"
    assert comparison.verdict == "regression"


def test_same_distribution_is_no_regression(runs: dict[str, Path]) -> None:
    comparison = compare_runs([runs["base"], runs["same"]], max_regression=0.05)
    assert {d.key: d.diff for d in comparison.pairs[0].diffs}["latency:p99"] == 0.0
    assert comparison.verdict == "ok"


def test_shift_at_the_tolerance_is_inconclusive(runs: dict[str, Path]) -> None:
    """+1 ms is +5.0% of p50: the CI straddles the allowed increase; p99 (+3.4%) is ok."""
    d = _diffs(compare_runs([runs["base"], runs["plus1"]], max_regression=0.05))
    assert d["latency:p50"].verdict == "inconclusive"
    assert d["latency:p99"].verdict == "ok"


def test_a_wider_tolerance_accepts_the_shift(runs: dict[str, Path]) -> None:
    assert compare_runs([runs["base"], runs["plus2"]], max_regression=0.15).verdict == "ok"


def test_more_refusals_are_a_regression(runs: dict[str, Path]) -> None:
    """5% refused against 0%: the error rate rose by more than 1 point."""
    d = _diffs(compare_runs([runs["base"], runs["refusing"]]))
    assert d["errors:rate"].verdict == "regression"
    assert 0.04 < d["errors:rate"].diff < 0.06


@pytest.mark.parametrize(
    ("candidate", "flags", "code"),
    [
        ("same", [], 0),
        ("plus2", [], 1),
        ("plus1", [], 1),
        ("plus1", ["--inconclusive-ok"], 0),
        ("plus2", ["--max-regression", "15%"], 0),
        ("plus2", ["--metric", "errors:rate"], 0),
    ],
)
def test_compare_cli_exit_codes(
    runs: dict[str, Path], candidate: str, flags: list[str], code: int
) -> None:
    result = runner.invoke(app, ["compare", str(runs["base"]), str(runs[candidate]), *flags])
    assert result.exit_code == code, result.output


@pytest.mark.parametrize(
    "args",
    [["only-one"], ["a", "b", "--max-regression", "lots"], ["a", "b", "--metric", "latency:p42"]],
)
def test_compare_bad_usage_exits_2(runs: dict[str, Path], args: list[str]) -> None:
    args = [
        str(runs["base"]) if a in ("only-one", "a") else str(runs["same"]) if a == "b" else a
        for a in args
    ]
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output


def test_compare_with_an_invalid_run_exits_4(runs: dict[str, Path], tmp_path: Path) -> None:
    write_synthetic_run(tmp_path / "tiny", n=50)
    result = runner.invoke(app, ["compare", str(runs["base"]), str(tmp_path / "tiny")])
    assert result.exit_code == 4


def test_compare_writes_html_markdown_json(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    args = ["compare", str(runs["base"]), str(runs["plus2"]), str(runs["same"]), "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 1
    data = json.loads((out / "compare.json").read_text())
    assert [p["verdict"] for p in data["pairs"]] == ["regression", "ok"]
    # Each statistic by its name: a field called "key" was redacted as a credential.
    diffs = {d["stat"]: d for d in data["pairs"][0]["diffs"]}
    assert diffs["latency:p50"]["verdict"] == "regression" and "time_to_reject:p99" in diffs
    assert "REGRESSION" in (out / "compare.md").read_text()
    page = (out / "compare.html").read_text()
    assert 'data-key="latency:p50" data-verdict="regression"' in page
    assert "data:image/png;base64," in page
    assert "hunter2" not in page and "sk-secret" not in page


def test_compare_md_shows_names_as_text(runs: dict[str, Path], tmp_path: Path) -> None:
    """A run folder or scenario named like HTML stays text in compare.md, and a pipe in it
    does not split a table cell."""
    hostile = tmp_path / "<img src=x>|b"
    shutil.copytree(runs["base"], hostile)
    summary = hostile / "summary.json"
    data = json.loads(summary.read_text())
    data["scenario"]["name"] = "<script>alert(1)</script>"
    summary.write_text(json.dumps(data))
    out = tmp_path / "cmp"
    runner.invoke(app, ["compare", str(hostile), str(runs["same"]), "--out", str(out)])
    text = (out / "compare.md").read_text()
    assert "<script" not in text and "<img" not in text
    assert "| &lt;script>alert(1)&lt;/script> |" in text
    assert "&lt;img src=x>\\|b" in text


def _with_source(src: Path, dst: Path, request_source: dict[str, object]) -> Path:
    shutil.copytree(src, dst)
    data = json.loads((dst / "summary.json").read_text())
    data["environment"]["request_source"] = request_source
    (dst / "summary.json").write_text(json.dumps(data))
    return dst


def test_compare_warns_when_the_runs_sent_other_requests(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    rows = {"source": "dataset", "sha256": "ab" * 32, "order": "shuffle"}
    a = _with_source(runs["base"], tmp_path / "a", rows)
    b = _with_source(runs["same"], tmp_path / "b", {**rows, "sha256": "cd" * 32})
    c = _with_source(runs["same"], tmp_path / "c", {**rows, "order": "sequential"})
    d = _with_source(runs["same"], tmp_path / "d", rows)
    comparison = compare_runs([a, b, c, d, runs["same"]])
    assert comparison.warnings == [
        "b did not send the requests a sent (dataset sha256 abababababab vs cdcdcdcdcdcd): "
        "compare with care",
        "c did not send the requests a sent (the same dataset, but another order): "
        "compare with care",
        "same did not send the requests a sent (dataset requests vs synthetic): compare with care",
    ]
    out = tmp_path / "cmp"
    result = runner.invoke(app, ["compare", str(a), str(b), "--out", str(out)])
    assert "> warning: b did not send the requests a sent" in result.output
    assert json.loads((out / "compare.json").read_text())["warnings"] == comparison.warnings[:1]
    assert "warning: b did not send" in (out / "compare.html").read_text()
    same = tmp_path / "same"
    runner.invoke(app, ["compare", str(a), str(d), "--out", str(same)])
    assert "warnings" not in json.loads((same / "compare.json").read_text())  # same requests


def test_the_fifo_and_zero_queue_twins_differ_where_a_queue_shows(tmp_path: Path) -> None:
    """The committed burst examples, FIFO then zero-queue: each run's row names its queued
    share and its latency P99/P50, the figures the twins differ by (#41), as its summary has
    them."""
    examples = Path(__file__).resolve().parents[2] / "reports" / "examples"
    fifo, zero = examples / "burst-fifo", examples / "burst-zero-queue"
    out = tmp_path / "cmp"
    runner.invoke(app, ["compare", str(fifo), str(zero), "--out", str(out)])
    runs = json.loads((out / "compare.json").read_text())["runs"]
    for run, folder in zip(runs, (fifo, zero), strict=True):
        summary = json.loads((folder / "summary.json").read_text())
        assert run["latency_p99_p50"] == summary["ratios"]["latency"]["p99_p50"]
        assert run["queued_share"] == summary["outcomes"]["admitted_queued_share"]
    assert runs[0]["queued_share"] > 0.5 and runs[1]["queued_share"] == 0
    # The FIFO baseline refused nothing: the zero-queue twin's time to reject still shows.
    fifo_frame, zero_frame = (
        frame_of(load_run(f).summary, load_run(f).samples()) for f in (fifo, zero)
    )
    [ttr] = [d for d in json.loads((out / "compare.json").read_text())["pairs"][0]["diffs"]
             if d["stat"] == "time_to_reject:p99"]  # fmt: skip
    assert ttr["baseline"] is None and ttr["verdict"] == "inconclusive"
    assert ttr["candidate"] == quantile(zero_frame.sorted_seconds("time_to_reject"), 0.99)
    assert fifo_frame.unavailable_reason("time_to_reject") == ttr["note"]
    text = (out / "compare.md").read_text()
    assert "| queued (of admitted) | latency P99/P50 |" in text
    for run in runs:
        assert f"| {run['queued_share']:.1%} | {run['latency_p99_p50']:.2f} |" in text
