"""`zqbench sweep --server-cmd`: the command template and its params (every mistake one line,
exit 2, before anything is launched), the settings they make, and the recommendation from
real runs' summaries."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.core.conftest import zqbench_here
from zqbench.errors import OptionError
from zqbench.outputs.advice import render_advice_md
from zqbench.outputs.advice_model import AdviceReport, SettingResult
from zqbench.pipeline.advise import (
    AdviseOptions,
    Setting,
    SettingRecord,
    outcome_line,
    recommend,
    redact_argv,
)
from zqbench.summary import Summary, json_schema

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "reports" / "examples"
CMD = "serve M --port {port} --max-num-queued-reqs {cap}"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--server-cmd", CMD],
            "--server-cmd: {cap} has no --server-param: add --server-param cap=V1,V2,... or "
            "take {cap} out of the command",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2,4", "--server-param", "seqs=4,8"],
            "--server-param seqs=4,8: the command has no {seqs}: put {seqs} in --server-cmd, "
            "or drop this --server-param",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap"],
            "--server-param cap: is not NAME=V1,V2,...: e.g. --server-param cap=2,4,8",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2,,4"],
            "--server-param cap=2,,4: has an empty value: list the values separated by single "
            "commas",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2,4,2"],
            "--server-param cap=2,4,2: 2 is listed twice",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2", "--server-param", "cap=4"],
            "--server-param cap=4: cap is given twice: list all its values in one --server-param",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2", "--server-param", "port=1,2"],
            "--server-param port=1,2: {port} is zqbench's to fill (--target's port, or a free "
            "loopback port): name this parameter otherwise",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "2cap=1"],
            "--server-param 2cap=1: NAME must be letters, digits and _, not starting with a digit",
        ),
        (
            ["--server-cmd", "serve 'M --port {port}"],
            "--server-cmd: cannot be split into words as a shell would: No closing quotation; "
            "close its quotes",
        ),
        (
            ["--server-cmd", "  "],
            "--server-cmd: is empty: give the server's command line, e.g. 'vllm serve M --port "
            "{port}'",
        ),
        (
            ["--server-cmd", "serve --port {port} {}"],
            "--server-cmd: {} is not a placeholder: a placeholder is {NAME} (letters, digits and "
            "_), and a literal brace is written {{ or }}",
        ),
        (
            ["--server-cmd", "serve --port {port!r}"],
            "--server-cmd: {port!r} is not a placeholder: a placeholder is {NAME} (letters, "
            "digits and _), and a literal brace is written {{ or }}",
        ),
        (
            ["--server-cmd", "serve --port {port} --json {a:1}"],
            "--server-cmd: {a:1} is not a placeholder: a placeholder is {NAME} (letters, digits "
            "and _), and a literal brace is written {{ or }}",
        ),
        (
            ["--server-cmd", "serve --port {port} x}"],
            "--server-cmd: 'x}' has an unmatched brace: a placeholder is {NAME}, a literal brace "
            "is written {{ or }}",
        ),
        (
            ["--server-cmd", "serve --cap {cap}", "--server-param", "cap=2,4"],
            "--server-cmd: has no {port} and no --target is given: give --target URL (where the "
            "command serves), or put {port} in the command (a free loopback port per setting)",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2", "--min-rate", "5"],
            "--min-rate is a rate sweep's; with --server-cmd each setting runs the scenario as it "
            "is (scale it with --rate-scale and --duration-scale): drop --min-rate",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2", "--server-engine", "sim"],
            "--server-engine sets up the bundled reference server, which --server-cmd replaces: "
            "drop --server-engine",
        ),
        (
            ["--server-cmd", CMD, "--server-param", "cap=2", "--ready-timeout", "0s"],
            "--ready-timeout 0: must be greater than 0",
        ),
        (
            ["--server-param", "cap=2,4"],
            "--server-param is --server-cmd's: give --server-cmd too, or drop --server-param",
        ),
        (
            ["--rate-scale", "0.5"],
            "--rate-scale scales the scenario each --server-cmd setting runs; a rate sweep sets "
            "each step's rate and length (--min-rate, --max-rate, --step-duration): drop "
            "--rate-scale",
        ),
    ],
)
def test_each_mistake_is_one_line_and_exit_2_before_any_launch(
    args: list[str], line: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    res = zqbench_here("sweep", "smoke", *args, "--out", str(out))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr == f"zqbench: error: {line}\n"
    assert not out.exists(), "nothing was written, nothing launched"


def test_too_many_combinations_is_refused() -> None:
    params = ("a=" + ",".join(map(str, range(11))), "b=" + ",".join(map(str, range(10))))
    with pytest.raises(OptionError) as caught:
        AdviseOptions("s {port} {a} {b}", params)
    assert caught.value.render("--server-param") == (
        "--server-param: 110 settings (11 x 10); a sweep runs at most 100: list fewer values"
    )


def test_settings_are_every_combination_the_last_param_fastest_each_value_one_word() -> None:
    options = AdviseOptions(
        "serve --port {port} --seqs {seqs} --cap={cap} --json '{{\"cap\": {cap}}}' --name '{name}'",
        ("seqs=4,8", "cap=2,16", "name=a b"),
    )
    settings = options.settings()
    assert [s.label for s in settings] == [
        "seqs=4 cap=2 name=a b",
        "seqs=4 cap=16 name=a b",
        "seqs=8 cap=2 name=a b",
        "seqs=8 cap=16 name=a b",
    ]
    assert settings[1].argv(options.words, 8123) == [
        "serve", "--port", "8123", "--seqs", "4", "--cap=16", "--json", '{"cap": 16}',
        "--name", "a b",
    ]  # fmt: skip
    assert [s.folder for s in settings[:2]] == [
        "setting-00-seqs-4_cap-2_name-a_b",
        "setting-01-seqs-4_cap-16_name-a_b",
    ]
    assert AdviseOptions("serve --port {port}").settings() == [Setting(0, {})]
    assert Setting(0, {}).label == "as given" and Setting(0, {}).folder == "setting-00"


def test_the_launched_command_keeps_no_secret() -> None:
    argv = ["serve", "--api-key", "hunter2hunter2", "--hf-token=abc", "--url", "http://u:p@h/x"]
    assert redact_argv(argv) == [
        "serve", "--api-key", "<redacted>", "--hf-token=<redacted>", "--url", "http://h/x",
    ]  # fmt: skip


# ------------------------------------------------------------------ the recommendation
def summary(example: str, **outcome_counts: int) -> Summary:
    s = Summary.model_validate_json((EXAMPLES / example / "summary.json").read_text())
    if outcome_counts and s.outcomes is not None:
        counts = {**s.outcomes.counts, **outcome_counts}
        s = s.model_copy(update={"outcomes": s.outcomes.model_copy(update={"counts": counts})})
    return s


def ran(index: int, cap: str, s: Summary) -> SettingResult:
    setting = Setting(index, {"cap": cap})
    return SettingRecord(setting, ["serve"], "http://127.0.0.1:1", setting.folder).ran(s, 30.0)


def with_false_refusals(s: Summary, count: int) -> Summary:
    assert s.outcomes is not None and s.outcomes.false_refusals is not None
    fr = s.outcomes.false_refusals.model_copy(update={"count": count})
    return s.model_copy(update={"outcomes": s.outcomes.model_copy(update={"false_refusals": fr})})


def test_the_recommendation_is_the_passing_setting_that_admits_most_and_says_why() -> None:
    """Three real runs' summaries: smoke (pass, 100 served in 5.1 s), saturation on a
    zero-queue server (pass, 1,435 served in 60.3 s, 1,595 refused), saturation on a FIFO
    server (fail: 38 of 294 admitted queued)."""
    low = ran(0, "2", with_false_refusals(summary("smoke-zero-queue", refused_fast=40), 40))
    best = ran(1, "4", summary("saturation-zero-queue"))
    high = ran(2, "16", summary("saturation-fifo"))
    assert (low.admitted, low.refused, low.false_refusals) == (100, 40, 40)
    assert low.admitted_per_s == pytest.approx(100 / 5.09694201)
    assert (best.admitted, best.queued, best.refused) == (1435, 0, 1595)
    assert best.admitted_per_s == pytest.approx(1435 / 60.259183399)
    assert best.refusal_share == pytest.approx(1595 / 3030)
    assert (high.admitted, high.queued, high.passed) == (294, 38, False)
    assert high.queued_share == pytest.approx(38 / 294)
    # The FIFO server admitted less per second here, but the order must not matter: give it
    # the most, and it still cannot be recommended (its verdict is fail).
    assert high.admitted_per_s is not None and high.admitted_per_s < best.admitted_per_s  # type: ignore[operator]
    rec = recommend([low, best, high])
    assert rec is not None and (rec.setting, rec.label) == (1, "cap=4")
    assert rec.why == (
        "the highest admitted throughput whose SLOs hold: 23.8 req/s admitted, none of them "
        "queued, TTFT p99 5.989 ms, 53% refused (time_to_reject p99 2.146 ms); "
        "cap=2 admitted 19.6 req/s and refused 40 requests while a slot was free; "
        "cap=16 admitted 15.7 req/s, let 13% of them queue (TTFT p99 77.63 ms) and was "
        "inconclusive on ttft:p99<100ms, time_to_reject:p99<50ms."
    )
    assert outcome_line([low, best, high], rec) == f"recommended: cap=4, {rec.why}"


def test_a_cap_that_refused_with_a_slot_free_loses_even_when_it_admitted_more() -> None:
    """vLLM on one CPU core admits about as much with 2 slots as with 4, so one short run can
    show cap 2 ahead (the CI of 10b13fb did); its refusals with a slot free say its cap is
    under the server's capacity, and the claim says what the winner was chosen by."""
    low = ran(0, "2", with_false_refusals(summary("saturation-zero-queue"), 12))
    best = ran(1, "4", summary("smoke-zero-queue"))
    assert low.admitted_per_s > best.admitted_per_s  # type: ignore[operator]
    rec = recommend([low, best])
    assert rec is not None and rec.label == "cap=4"
    assert rec.why.startswith(
        "the highest admitted throughput whose SLOs hold without refusing while a slot was "
        "free: 19.6 req/s admitted"
    ), rec.why
    assert rec.why.endswith(
        "; cap=2 admitted 23.8 req/s and refused 12 requests while a slot was free."
    ), rec.why
    # With every passing setting refusing that way, throughput decides alone.
    low2 = ran(1, "3", with_false_refusals(summary("smoke-zero-queue"), 3))
    only = recommend([low, low2])
    assert only is not None and only.label == "cap=2"
    assert only.why.startswith("the highest admitted throughput whose SLOs hold: 23.8 req/s")


def test_equal_throughput_goes_to_the_first_and_no_pass_is_no_recommendation() -> None:
    a, b = ran(0, "4", summary("smoke-zero-queue")), ran(1, "8", summary("smoke-zero-queue"))
    rec = recommend([a, b])
    assert rec is not None and rec.label == "cap=4"
    failing = [ran(0, "2", summary("burst-fifo")), ran(1, "4", summary("burst-zero-queue"))]
    assert recommend(failing) is None
    assert outcome_line(failing, None) == (
        "no recommendation: no setting's SLOs hold (cap=2: fail, cap=4: inconclusive); an "
        "inconclusive verdict had too few requests to decide: raise --duration-scale"
    )


def test_a_setting_that_never_ran_is_never_recommended_and_is_named() -> None:
    setting = Setting(0, {"cap": "0"})
    never = SettingRecord(setting, ["serve"], "http://127.0.0.1:1", setting.folder).failed(
        "exited", "the server command exited with code 2", ["error: cap must be >= 1"], None
    )
    best = ran(1, "4", summary("smoke-zero-queue"))
    rec = recommend([never, best])
    assert rec is not None and rec.setting == 1
    assert rec.why.endswith("; cap=0 never ran (its server exited before it was ready).")
    assert outcome_line([never], None) == "no recommendation: no setting's server came to serve"
    report = AdviceReport(
        scenario="burst",
        command="serve --cap {cap}",
        params={"cap": ["0", "4"]},
        target="http://127.0.0.1:{port}",
        started_at="2026-12-06T00:00:00+00:00",
        slos=["ttft:p99<100ms"],
        ready_timeout_s=300.0,
        settings=[never, best],
        recommendation=rec,
        outcome=outcome_line([never, best], rec),
    )
    md = render_advice_md(report)
    assert "| `cap=4` (recommended) | pass | 19.6 | 0% | 0 |" in md
    assert "| `cap=0` | exited | - | - | - |" in md
    assert "    error: cap must be >= 1" in md  # the log's tail, as indented code
    text = report.to_json()
    assert AdviceReport.model_validate_json(text).to_json() == text
    schema = json.loads((REPO / "docs" / "advice.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads(text))


def test_committed_schema_is_the_generated_one() -> None:
    """Regenerate with `python -m zqbench.outputs.advice_model > docs/advice.schema.json`."""
    assert (REPO / "docs" / "advice.schema.json").read_text() == json_schema(AdviceReport)
