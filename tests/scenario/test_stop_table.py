"""The `[stop]` table: each rule's defaults, every value kept, every error's exact message."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from zqbench.errors import ScenarioError
from zqbench.scenario import Scenario, load_scenario
from zqbench.stop.config import (
    ErrorRateRule,
    QueuedShareRule,
    QueueGrowthRule,
    StopConfig,
)

MINIMAL = """
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "5s"
"""


def write(tmp_path: Path, text: str, name: str = "x.toml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def load(tmp_path: Path, stop: str) -> Scenario:
    return load_scenario(write(tmp_path, MINIMAL + textwrap.dedent(stop)))


def error_of(path: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return str(info.value)


# --------------------------------------------------------------------------- defaults


def test_no_stop_table_means_no_rules(tmp_path: Path) -> None:
    s = load(tmp_path, "")
    assert s.stop == StopConfig()
    assert s.stop.rules() == []


def test_error_rate_defaults(tmp_path: Path) -> None:
    s = load(tmp_path, "[stop.error_rate]\nabove = 0.5\n")
    assert s.stop == StopConfig(error_rate=ErrorRateRule(above=0.5))
    rule = s.stop.error_rate
    assert rule is not None
    assert (rule.window_s, rule.min_requests, rule.count_refusals, rule.ends) == (
        5.0,
        20,
        False,
        "run",  # a breaker ends the run
    )
    assert s.stop.rules() == [("error_rate", rule)]


def test_queue_growth_defaults(tmp_path: Path) -> None:
    s = load(tmp_path, "[stop.queue_growth]\n")
    rule = s.stop.queue_growth
    assert rule == QueueGrowthRule(
        window_s=3.0, confidence=0.95, min_rise_s=None, min_requests=10, ends="stage"
    )
    assert s.stop.error_rate is None and s.stop.queued_share is None


def test_queued_share_defaults(tmp_path: Path) -> None:
    s = load(tmp_path, "[stop.queued_share]\nabove = 0.25\n")
    assert s.stop.queued_share == QueuedShareRule(
        above=0.25, window_s=5.0, min_requests=20, ends="stage"
    )


def test_above_of_exactly_one_is_allowed(tmp_path: Path) -> None:
    s = load(tmp_path, "[stop.queued_share]\nabove = 1\n")
    assert s.stop.queued_share is not None
    assert s.stop.queued_share.above == 1.0


# --------------------------------------------------------------------------- values kept


def test_every_value_given_is_kept(tmp_path: Path) -> None:
    s = load(
        tmp_path,
        """
        [stop.error_rate]
        above = 0.3
        window = "2s"
        min_requests = 7
        count_refusals = true
        ends = "stage"

        [stop.queue_growth]
        window = "1m30s"
        confidence = 0.99
        min_rise = "150ms"
        min_requests = 4
        ends = "run"

        [stop.queued_share]
        above = 0.75
        window = "500ms"
        min_requests = 2
        ends = "run"
        """,
    )
    assert s.stop == StopConfig(
        error_rate=ErrorRateRule(
            above=0.3, window_s=2.0, min_requests=7, count_refusals=True, ends="stage"
        ),
        queue_growth=QueueGrowthRule(
            window_s=90.0, confidence=0.99, min_rise_s=0.15, min_requests=4, ends="run"
        ),
        queued_share=QueuedShareRule(above=0.75, window_s=0.5, min_requests=2, ends="run"),
    )
    # In RULE_TYPES order, whatever the file's order.
    assert [name for name, _ in s.stop.rules()] == ["error_rate", "queue_growth", "queued_share"]


def test_rules_in_rules_order_whatever_the_files(tmp_path: Path) -> None:
    s = load(
        tmp_path,
        '[stop.queued_share]\nabove = 0.5\n[stop.error_rate]\nabove = 0.5\nends = "stage"\n',
    )
    assert [name for name, _ in s.stop.rules()] == ["error_rate", "queued_share"]


def test_window_of_exactly_the_maximum_is_allowed(tmp_path: Path) -> None:
    s = load(tmp_path, '[stop.error_rate]\nabove = 0.5\nwindow = "10m"\n')
    assert s.stop.error_rate is not None
    assert s.stop.error_rate.window_s == 600.0


def test_to_dict_holds_the_stop_table(tmp_path: Path) -> None:
    s = load(
        tmp_path,
        '[stop.error_rate]\nabove = 0.5\n[stop.queue_growth]\nmin_rise = "150ms"\n',
    )
    d = s.to_dict()
    assert d["stop"] == {
        "error_rate": {
            "above": 0.5,
            "window_s": 5.0,
            "min_requests": 20,
            "count_refusals": False,
            "ends": "run",
        },
        "queue_growth": {
            "window_s": 3.0,
            "confidence": 0.95,
            "min_rise_s": 0.15,
            "min_requests": 10,
            "ends": "stage",
        },
        "queued_share": None,
    }
    assert json.loads(json.dumps(d)) == d


def test_to_dict_without_stop(tmp_path: Path) -> None:
    d = load(tmp_path, "").to_dict()
    assert d["stop"] == {"error_rate": None, "queue_growth": None, "queued_share": None}
    assert json.loads(json.dumps(d)) == d


# --------------------------------------------------------------------------- errors

ERRORS = [
    (
        "[stop]\n",
        "[stop] names no rule; add one of [stop.error_rate], [stop.queue_growth], "
        "[stop.queued_share]",
    ),
    (
        '[stop.error_rate]\nwindow = "5s"\n',
        "stop.error_rate.above is missing: the share (0 < above <= 1) past which the rule trips",
    ),
    (
        "[stop.queued_share]\n",
        "stop.queued_share.above is missing: the share (0 < above <= 1) past which the rule trips",
    ),
    (
        "[stop.error_rate]\nabove = 1.5\n",
        "stop.error_rate.above = 1.5 must be a share of the window's requests, 0 < above <= 1",
    ),
    ("[stop.error_rate]\nabove = 0\n", "stop.error_rate.above = 0 must be > 0"),
    ("[stop.queued_share]\nabove = -0.1\n", "stop.queued_share.above = -0.1 must be > 0"),
    (
        '[stop.error_rate]\nabove = "half"\n',
        'stop.error_rate.above = "half" must be a number',
    ),
    (
        '[stop.queued_share]\nabove = 0.5\nwindow = "20m"\n',
        'stop.queued_share.window = "20m" must be at most 600s',
    ),
    (
        '[stop.queue_growth]\nwindow = "601s"\n',
        'stop.queue_growth.window = "601s" must be at most 600s',
    ),
    (
        "[stop.error_rate]\nabove = 0.5\nwindow = 5\n",
        'stop.error_rate.window = 5 must be a string with a unit, e.g. "30s", "500ms", "2m" '
        "(a bare number could mean seconds or milliseconds)",
    ),
    (
        '[stop.error_rate]\nabove = 0.5\nwindow = "0s"\n',
        'stop.error_rate.window = "0s" must be longer than 0s',
    ),
    (
        '[stop.error_rate]\nabove = 0.5\nends = "stage2"\n',
        'stop.error_rate.ends = "stage2" is not one of stage, run',
    ),
    (
        "[stop.queue_growth]\nconfidence = 1\n",
        "stop.queue_growth.confidence = 1 must be below 1 (0.95: a one-sided 95% bound)",
    ),
    (
        "[stop.queue_growth]\nconfidence = 0.3\n",
        "stop.queue_growth.confidence = 0.3 must be > 0.5",
    ),
    (
        "[stop.queue_growth]\nconfidence = 0.5\n",
        "stop.queue_growth.confidence = 0.5 must be > 0.5",
    ),
    (
        '[stop.queue_growth]\nmin_rise = "0ms"\n',
        'stop.queue_growth.min_rise = "0ms" must be longer than 0s',
    ),
    (
        "[stop.error_rate]\nabove = 0.5\nmin_requests = 1\n",
        "stop.error_rate.min_requests = 1 must be >= 2",
    ),
    (
        "[stop.queued_share]\nabove = 0.5\nmin_requests = -1\n",
        "stop.queued_share.min_requests = -1 must be >= 2",
    ),
    (
        # #44 item 6a: two waits have no slope bound (n - 2 = 0), so the rule never judged
        "[stop.queue_growth]\nmin_requests = 2\n",
        "stop.queue_growth.min_requests = 2 must be >= 3: a slope's confidence bound needs "
        "3 waits (n - 2 degrees of freedom)",
    ),
    (
        "[stop.queued_share]\nabove = 0.5\nmin_requests = 2.5\n",
        "stop.queued_share.min_requests = 2.5 must be a whole number",
    ),
    (
        '[stop.error_rate]\nabove = 0.5\ncount_refusals = "yes"\n',
        'stop.error_rate.count_refusals = "yes" must be true or false',
    ),
    (
        "[stop.error_rat]\nabove = 0.5\n",
        'unknown key "stop.error_rat"; did you mean "stop.error_rate"? '
        "(allowed in [stop]: error_rate, queue_growth, queued_share)",
    ),
    (
        "[stop.queue_growth]\nmin_rise_ms = 80\n",
        'unknown key "stop.queue_growth.min_rise_ms"; did you mean '
        '"stop.queue_growth.min_rise"? (allowed in [stop.queue_growth]: window, confidence, '
        "min_rise, min_requests, ends)",
    ),
    (
        # queued_share takes no count_refusals: error_rate's key, not its own
        "[stop.queued_share]\nabove = 0.5\ncount_refusals = true\n",
        'unknown key "stop.queued_share.count_refusals" (allowed in [stop.queued_share]: '
        "above, window, min_requests, ends)",
    ),
    (
        "[stop]\nerror_rate = 0.5\n",
        "stop.error_rate must be a table, got 0.5",
    ),
    (
        'stop = "on"\n',
        'stop must be a table, got "on"',
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_stop_errors(tmp_path: Path, text: str, message: str) -> None:
    if text.startswith("stop ="):  # a top-level key: before [load]
        path = write(tmp_path, text + MINIMAL)
    else:
        path = write(tmp_path, MINIMAL + text)
    got = error_of(path)
    assert got == f"{path}: {message}"
    assert "\n" not in got  # one line
