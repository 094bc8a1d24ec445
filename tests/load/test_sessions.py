"""The sessions executor: its keys' errors, its plan (session starts, ids, workers), its
think times from the seed, and its wire form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from zqbench.errors import OptionError, ScenarioError
from zqbench.load import SessionsLoad, work_from_wire, work_to_wire
from zqbench.load.sessions import SessionWork
from zqbench.scenario import Scenario, load_scenario


def _scenario(tmp_path: Path, load: str) -> Scenario:
    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\n[load]\nexecutor = "sessions"\nduration = "10s"\n{load}\n')
    return load_scenario(str(path))


def test_sessions_at_a_rate_plan_their_starts_and_every_turn(tmp_path: Path) -> None:
    s = _scenario(tmp_path, 'rate = 2\nturns = 3\nthink_time = "1s"')
    assert isinstance(s.load, SessionsLoad)
    plan = s.load.plan(2, seed=0)
    assert (plan.offered, plan.loop) == (60, "open")  # 20 sessions of 3 turns
    w0, w1 = plan.works
    assert isinstance(w0, SessionWork) and isinstance(w1, SessionWork)
    assert w0.starts_ns.tolist()[:2] == [500_000_000, 1_500_000_000]  # uniform: 0.5 s apart
    assert w1.sessions.tolist()[:2] == [1, 3]
    assert w0.assigned() == 30 and w0.due(10**12) is None
    # Turn 0 of each session is scheduled: a lost one is missing.
    assert w1.missing(np.array([3, 9])) == (8, 3.0, 10.0)  # sessions 1 and 3 arrived
    back = work_from_wire(work_to_wire(w1))
    assert isinstance(back, SessionWork)
    assert back.sessions.tolist() == w1.sessions.tolist() and back.turns == 3
    assert s.scaled(rate_scale=2.0, duration_scale=0.5).load.plan(1, 0).offered == 60


def test_users_run_sessions_back_to_back(tmp_path: Path) -> None:
    s = _scenario(tmp_path, "users = 3\nturns = 2")
    plan = s.load.plan(2, seed=0)
    assert (plan.offered, plan.loop) == (0, "closed")
    assert [w.users.tolist() for w in plan.works] == [[0, 2], [1]]
    assert plan.works[0].assigned() is None
    with pytest.raises(OptionError, match="applies to sessions started at a rate"):
        s.with_overrides(arrivals="poisson")


def test_think_times_come_from_the_seed_per_session(tmp_path: Path) -> None:
    s = _scenario(tmp_path, 'rate = 1\nturns = 50\nthink_time = "2s"\nthink = "exponential"')
    work = s.load.plan(1, seed=7).works[0]
    other = s.load.plan(3, seed=7).works[1]  # session 1 on another worker count
    assert work._thinks(1) == other._thinks(1) != work._thinks(2)
    assert 1.0e9 < np.mean(work._thinks(1)) < 3.0e9
    fixed = _scenario(tmp_path, 'rate = 1\nturns = 3\nthink_time = "2s"').load.plan(1, 0)
    assert fixed.works[0]._thinks(5) == [2_000_000_000] * 3


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ("turns = 2", "[load] has neither of load.rate and load.users; give one (sessions "
         "started per second, or users running sessions back to back)"),
        ("rate = 1\nusers = 2\nturns = 2", "[load] has both of load.rate and load.users"),
        ("rate = 1", "load.turns is missing (executor sessions needs duration, turns)"),
        ("rate = 1\nturns = 0", "load.turns = 0 must be"),
        ("rate = 1\nturns = 20000", "load.turns = 20000 is more than 10,000 turns a session"),
        ('users = 2\nturns = 2\narrivals = "poisson"',
         'load.arrivals = "poisson" applies to sessions started at a rate, not to users'),
        ('rate = 1\nturns = 2\nthink = "gamma"', 'load.think = "gamma" is not one of fixed, '
         "exponential"),
    ],
)  # fmt: skip
def test_sessions_scenario_errors(tmp_path: Path, load: str, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        _scenario(tmp_path, load)
    assert str(e.value).split(": ", 1)[1].startswith(message), str(e.value)
