"""conform's checks run in any order with the same verdicts: they judge the observations of
a fixed plan (zqbench/conform/phases.py), measured before any check, and see only the
observations they declare."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.conform.fake_server import MODEL, FakeServer
from tests.conform.util import fake_options
from zqbench.conform import phases, run_conformance, runner
from zqbench.conform.catalogue import CATALOGUE
from zqbench.conform.context import Sender, Target
from zqbench.conform.model import Check
from zqbench.conform.observations import MissingObservation, Observations

SEED = 39  # a fixed permutation: a failure names the order it ran in


def _shuffled() -> tuple[Check, ...]:
    order = list(CATALOGUE)
    random.Random(SEED).shuffle(order)
    assert [c.id for c in order] != [c.id for c in CATALOGUE]
    return tuple(order)


def _verdicts(checks: tuple[Check, ...], obs: Observations) -> dict[str, tuple[Any, ...]]:
    out = {}
    for check in checks:
        result = runner.judge(check, obs)
        # repr: evidence may hold NaN, which equals nothing, itself included
        out[check.id] = (result.status, result.reason, repr(result.evidence))
    return out


@pytest.mark.slow
def test_a_permutation_judges_the_same_observations_alike() -> None:
    with FakeServer({"refuse_429"}) as srv:
        sender = Sender(Target(fake_options(srv.base_url), MODEL))
        try:
            obs, _ = phases.measure(sender, phases.planned(n for c in CATALOGUE for n in c.needs))
        finally:
            sender.close()
        sent = len(sender.seen)
        in_order = _verdicts(CATALOGUE, obs)
        shuffled = _verdicts(_shuffled(), obs)
    assert shuffled == in_order
    assert {v[0] for v in in_order.values()} == {"pass", "fail", "skip"}
    assert len(sender.seen) == sent  # judging sends nothing


@pytest.mark.slow
@pytest.mark.parametrize(
    "server",
    [{"faults": {"refuse_429"}}, {"queue": True, "slots": 2}],
    ids=["refusing", "queueing"],
)
def test_a_run_in_a_shuffled_catalogue_gives_the_same_verdicts(
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs, one in catalogue order, one in a seeded permutation: each check's status
    is the same (the second run measures afresh, so only the verdicts are compared)."""
    statuses = []
    for checks in (CATALOGUE, _shuffled()):
        monkeypatch.setattr(runner, "CATALOGUE", checks)
        with FakeServer(**server) as srv:
            report = run_conformance(fake_options(srv.base_url))
        statuses.append({o.id: o.status for o in report.outcomes})
    assert statuses[0] == statuses[1]
    assert len(set(statuses[0].values())) == 3, statuses[0]  # pass, fail and skip all judged


def test_a_check_sees_only_the_observations_it_declared() -> None:
    obs = Observations(Target(fake_options("http://127.0.0.1:9")), {"at_rest": []})
    assert obs.view(("at_rest",)).at_rest() == []
    with pytest.raises(MissingObservation):
        obs.view(("slope",)).at_rest()


def test_every_check_declares_phases_of_the_plan() -> None:
    names = {p.name for p in phases.PLAN}
    assert all(set(c.needs) <= names for c in CATALOGUE)
    assert all(set(p.after) <= names for p in phases.PLAN)
