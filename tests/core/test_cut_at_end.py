"""Requests still unanswered at the run's end: how many, how many had not started, how old,
and why they count as they do, in summary.json, summary.md and report.html.

The program applies to the target's API checks too (a one-token request each, before the
load), so it is kept short. The programmed server's truth decides: a program whose first
token comes after 1.5 s leaves every request waiting at the cut (1 s after the first send);
one that streams for 1.5 s leaves them mid-answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.conftest import run_programmed

pytestmark = pytest.mark.slow

SCENARIO = """
name = "cut"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "0.5s"
graceful_stop = "0.5s"
[request]
max_tokens = 400
prompt_tokens = 8
[validity]
min_samples = 5
max_schedule_lag = "500ms"
[outcomes]
at_rest_probes = 0  # the probes would wait too
"""


@pytest.mark.parametrize(
    ("program", "waiting"),
    [
        ("x-program: /anthropic?n=4&every=1&first=1500&head=1", True),
        ("x-program: /anthropic?n=150&every=10&first=5&head=1", False),
    ],
)
def test_requests_cut_by_the_graceful_stop_say_so(
    tmp_path: Path, program: str, waiting: bool
) -> None:
    result, _ = run_programmed(tmp_path, SCENARIO, program, html=True)  # read below
    summary = result.summary
    cut = summary.cut_at_end
    assert cut is not None
    assert (cut.how, cut.grace) == ("graceful_stop", 0.5)
    assert cut.requests == summary.requests.sent == 10  # every one: none finished
    assert (cut.waiting, cut.streaming) == ((10, 0) if waiting else (0, 10))
    # The grace counts from the last dispatch (0.45 s), and that send is stamped when its task
    # writes, just after: about 0.5 s old, never less than the grace by more than the stamp's
    # delay (0.6 ms in one CI run).
    assert 0.45 <= cut.age_min <= cut.age_max < 1.5
    assert summary.outcomes is not None and summary.outcomes.counts["interrupted"] == 10
    md = (result.out_dir / "summary.md").read_text()
    sentence = (
        "10 requests were still unanswered when the graceful stop ended (0.5 s after the "
        "last scheduled send), "
    )
    assert sentence in md
    assert f"{cut.waiting} had no first token yet (still waiting to start)" in md
    assert sentence in (result.out_dir / "report.html").read_text()


def test_the_graceful_stop_flag_overrides_the_scenarios(tmp_path: Path) -> None:
    """`--graceful-stop 0.5s` on a scenario that gives 30 s: the requests still waiting
    (first token at 1.5 s) are cut 0.5 s after the schedule's end, said so with the flag's
    grace."""
    scenario = SCENARIO.replace('graceful_stop = "0.5s"', 'graceful_stop = "30s"')
    program = "x-program: /anthropic?n=4&every=1&first=1500&head=1"
    result, _ = run_programmed(tmp_path, scenario, program, graceful_stop_s=0.5)
    cut = result.summary.cut_at_end
    assert cut is not None and (cut.how, cut.grace) == ("graceful_stop", 0.5)
    assert (cut.requests, cut.waiting) == (10, 10)
    # The flag's grace from the last dispatch, as above; never the scenario's 30 s.
    assert 0.45 <= cut.age_min <= cut.age_max < 1.5
