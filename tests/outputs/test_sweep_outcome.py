"""A sweep with no passing rate says why the lowest rate did not pass: fail, inconclusive
and invalid are three different stories (only a fail means "the SLOs fail")."""

from __future__ import annotations

import pytest

from tests.test_summary_schema import sweep_report, sweep_step
from zqbench.outputs.sweep import outcome, render_sweep_md
from zqbench.summary import Knee, SweepReport


def report(verdicts: list[str], knee: Knee | None = None) -> SweepReport:
    # An invalid step's SLOs still have their own verdicts; only the run is invalid.
    steps = [
        sweep_step(i, 50.0 * (i + 1), "fail" if v == "invalid" else v).model_copy(
            update={"verdict": v}
        )
        for i, v in enumerate(verdicts)
    ]
    return sweep_report(steps, knee)


@pytest.mark.parametrize(
    ("verdict", "line"),
    [
        ("fail", "no passing rate: at the lowest rate, 50 req/s, the SLOs fail"),
        (
            "inconclusive",
            "no passing rate: at the lowest rate, 50 req/s, the SLOs are inconclusive"
            " (too few samples to decide)",
        ),
        (
            "invalid",
            "no passing rate: at the lowest rate, 50 req/s, the run is invalid"
            " (the generator could not hold the rate)",
        ),
    ],
)
def test_no_knee_names_the_lowest_steps_verdict(verdict: str, line: str) -> None:
    swept = report([verdict])
    assert outcome(swept) == line
    assert f"**{line}**" in render_sweep_md(swept)


def test_a_knee_is_the_capacity() -> None:
    swept = report(["pass", "fail"], knee=Knee(rate=50.0, step=0))
    assert outcome(swept) == "capacity at SLO: 50 req/s (step 0)"


def test_sweep_md_shows_names_as_text() -> None:
    swept = report(["fail"]).model_copy(update={"scenario": "<script>x</script>"})
    text = render_sweep_md(swept)
    assert "<script" not in text
    assert "## zqbench sweep · &lt;script>x&lt;/script> → " in text
