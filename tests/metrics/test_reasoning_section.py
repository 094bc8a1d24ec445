"""summary.json's `reasoning` and the `ttfa` metric (#42): what reasoning models and tool
calls did, in summary.md, report.html and the terminal; absent for a plain model."""

from __future__ import annotations

import numpy as np
import pytest

from tests.metrics.conftest import MS, build_samples
from tests.metrics.test_summary import run_info
from zqbench.cli.live_view import section_lines
from zqbench.dialects.base import REDACTED, TEXT, THINKING, TOOL
from zqbench.errors import UsageError
from zqbench.metrics.slo import parse_slo
from zqbench.metrics.summarize import summarize
from zqbench.outputs.render import render_report_html, render_summary_md

# Ten requests of 40 ms: the first token at 20 ms (the builder's shape); four think, their
# first answer 10, 20, 30, 40 ms later (one of them redacted, one with the server's count),
# one only thinks, two call a tool (one of them twice), three answer plain text.
LATENCY = [40.0] * 10
T_SEND = np.arange(10) * 10 * MS
FIRST = T_SEND + 20 * MS
CARRIED = [THINKING | TEXT] * 3 + [THINKING | REDACTED | TEXT, THINKING, TOOL, TOOL] + [TEXT] * 3
ANSWER = [*(FIRST[:4] + np.array([10, 20, 30, 40]) * MS), None, *FIRST[5:]]
REASONING = [100, 200, 300, 400, 50, None, None, None, None, None]
FROM_USAGE = [False, True, False, False, False, False, False, False, False, False]
CALLS = [0, 0, 0, 0, 0, 1, 2, 0, 0, 0]


def _summary(slos: list[str] | None = None):  # type: ignore[no-untyped-def]
    samples = build_samples(
        LATENCY,
        carried=CARRIED,
        t_first_answer=ANSWER,
        reasoning_tokens=REASONING,
        reasoning_from_usage=FROM_USAGE,
        tool_calls=CALLS,
    )
    return summarize(samples, run=run_info(), slos=slos or [])


def test_the_section_counts_thinking_and_tool_calls_and_times_the_thinking() -> None:
    r = _summary().reasoning
    assert r is not None
    assert (r.requests, r.thinking_requests, r.redacted, r.unanswered) == (10, 5, 1, 1)
    assert r.thinking_p50 == pytest.approx(0.02)  # x_(2) of 10, 20, 30, 40 ms
    assert r.thinking_p99 == pytest.approx(0.04)
    assert r.reasoning_tokens_mean == pytest.approx(210.0)  # (100 + ... + 400 + 50) / 5
    assert r.reasoning_tokens_counted == 4  # all but the one with the server's count
    assert (r.tool_requests, r.tool_calls) == (2, 3)


def test_ttfa_is_the_answers_time_and_gates_like_any_duration() -> None:
    summary = _summary(["ttfa:max<61ms", "ttft:max<21ms"])
    ttfa = summary.metrics["ttfa"]
    assert ttfa.n == 9  # the request that only thought has no answer
    assert ttfa.max == pytest.approx(0.06)  # 20 ms to the first token, 40 of thinking
    assert [s.verdict for s in summary.slos] == ["pass", "pass"]


def test_a_plain_models_run_has_no_section_and_lists_no_ttfa() -> None:
    """ttfa equals ttft there: summary.json does not repeat it (a file written before ttfa
    existed re-gates unchanged), and an SLO on it is judged all the same."""
    summary = summarize(build_samples([40.0] * 3), run=run_info(), slos=["ttfa:max<21ms"])
    assert summary.reasoning is None and "reasoning" not in summary.to_json()
    assert "ttfa" not in summary.metrics
    assert summary.slos[0].verdict == "pass"  # 20 ms: the first token is the answer


def test_every_output_shows_it() -> None:
    summary = _summary()
    said = (
        "5 of 10 answers thought first, 210 thinking tokens on average (4 counted by zqbench:"
        " no usage count), 1 redacted: p50 20 ms (p99 40) from the first token to the first"
        " answer token; 1 only thought (no answer within max_tokens); 2 answers called a tool"
        " (3 calls)"
    )
    assert section_lines(summary)[1] == f"reasoning: {said}"  # after the TTFT split
    md = render_summary_md(summary)
    assert "| thought before answering (first token to first answer token) | 5 | 20 | 40 |" in md
    assert f"{said}." in md
    page = render_report_html(summary, [])
    assert '<td>called a tool</td><td class="num">2</td>' in page
    assert f"{said}." in page


def test_reasoning_tokens_gate_as_a_count_of_the_answers_that_thought() -> None:
    """The thinking counts of the five answers that thought: 100, 200, 300, 400, 50."""
    summary = _summary(["reasoning_tokens:mean<250", "reasoning_tokens:max<=400"])
    assert [(s.verdict, s.value) for s in summary.slos] == [("pass", 210.0), ("pass", 400.0)]
    plain = summarize(build_samples([40.0] * 3), run=run_info(), slos=["reasoning_tokens:mean<1"])
    assert plain.slos[0].verdict == "inconclusive"
    assert "no successful answer carried thinking" in plain.slos[0].message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("reasoning_tokens<100", "reasoning_tokens needs an aggregate, e.g. reasoning_tokens:mean"),
        ("reasoning_tokens:mean<100ms", "reasoning_tokens is a count of tokens and takes no unit"),
        ("reasoning_tokens:p99/p50<2", "reasoning_tokens needs an aggregate"),
    ],
)
def test_a_count_slo_takes_an_aggregate_and_no_unit(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_slo(text)
    assert problem in str(err.value)
