"""VU plans (closed loop): k6 ramping-vus targets at known times."""

from __future__ import annotations

import pytest

from zqbench.load import Stage
from zqbench.load.vu_schedule import vu_plan
from zqbench.load.vus import VuLoad
from zqbench.scenario import load_scenario

S = 1_000_000_000


def ramping_vus(stages: list[tuple[float, int]], start: int = 0, think: float = 0.0) -> VuLoad:
    return VuLoad(
        executor="ramping-vus",
        start_vus=start,
        stages=tuple(Stage(d, float(t), None) for d, t in stages),
        think_time_s=think,
        duration_s=sum(d for d, _ in stages),
        graceful_stop_s=30.0,
    )


def test_ramp_up_adds_one_vu_per_step() -> None:
    """0 -> 10 over 10 s: VU k joins at k seconds (k6 steps), none at t = 0."""
    p = vu_plan(ramping_vus([(10.0, 10)]))
    assert p.target_at(0) == 0
    assert p.target_at(S - 1) == 0
    assert p.target_at(S) == 1
    assert p.target_at(int(5.5 * S)) == 5
    assert p.target_at(10 * S - 1) == 9
    assert p.target_at(10 * S) == 0  # the run is over
    assert p.duration_ns == 10 * S


def test_ramp_down_removes_one_vu_per_step() -> None:
    """10 -> 0 over 10 s: still 10 just before 1 s, 9 from 1 s."""
    p = vu_plan(ramping_vus([(10.0, 0)], start=10))
    assert p.target_at(0) == 10
    assert p.target_at(S - 1) == 10
    assert p.target_at(S) == 9
    assert p.target_at(int(9.5 * S)) == 1


def test_closed_loop_scenario_plan() -> None:
    load = load_scenario("closed-loop").load
    p = vu_plan(load)
    assert p.think_time_ns == 100_000_000
    assert load.graceful_stop_s == 30
    assert p.target_at(int(0.2 * S)) == 1  # 50 VUs over 10 s: one every 200 ms
    assert p.target_at(5 * S) == 25
    assert p.target_at(10 * S) == 50
    assert p.target_at(25 * S) == 50
    assert p.target_at(45 * S) == 25
    assert p.target_at(50 * S - 1) == 1
    assert [p.stage_at(t * S) for t in (0, 9, 10, 39, 40, 49, 50, 99)] == [0, 0, 1, 1, 2, 2, 2, 2]


def test_constant_vus_plan() -> None:
    load = VuLoad(
        executor="constant-vus",
        start_vus=8,
        stages=(Stage(5.0, 8.0, None),),
        think_time_s=0.0,
        duration_s=5.0,
        graceful_stop_s=1.0,
    )
    p = vu_plan(load)
    assert [p.target_at(t) for t in (0, S, 5 * S - 1, 5 * S)] == [8, 8, 8, 0]
    assert p.think_time_ns == 0


def test_zero_length_stage_is_a_step() -> None:
    p = vu_plan(ramping_vus([(2.0, 2), (0.0, 10), (2.0, 10)], start=2))
    assert p.target_at(2 * S - 1) == 2
    assert p.target_at(2 * S) == 10
    assert p.stage_at(2 * S) == 2
    assert p.target_at(4 * S - 1) == 10 and p.target_at(4 * S) == 0


def test_uneven_steps() -> None:
    """1 -> 7 over 3 s changes at ceil(i·3 s / 6): the first step at 0.5 s."""
    p = vu_plan(ramping_vus([(3.0, 7), (1.0, 7)], start=1))
    assert p.target_at(S // 2 - 1) == 1 and p.target_at(S // 2) == 2
    assert p.target_at(3 * S - 1) == 6 and p.target_at(3 * S) == 7


def test_rejects_negative_time() -> None:
    p = vu_plan(load_scenario("closed-loop").load)
    with pytest.raises(ValueError):
        p.target_at(-1)
