"""A load too large to plan is exit 2 with the bound, before anything is allocated (#25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zqbench.errors import EXIT_USAGE, UsageError
from zqbench.pipeline.options import PlanOptions
from zqbench.pipeline.plan import make_plan


def _options(scenario: str, **overrides: object) -> PlanOptions:
    return PlanOptions(scenario=scenario, **overrides)  # type: ignore[arg-type]


def _file(tmp_path: Path, load: str) -> str:
    path = tmp_path / "big.toml"
    path.write_text(f'name = "big"\n[load]\n{load}\n')
    return str(path)


REQUESTS = (
    "a run plans at most 3,600,000 (its analysis holds every request's row in memory): lower "
    "the rate or the duration (or --rate-scale, --duration-scale), or split the load into "
    "several runs"
)


@pytest.mark.parametrize(
    ("load", "asked"),
    [
        ('executor = "constant-arrival-rate"\nrate = 1e308\nduration = "10s"', "inf"),
        ('executor = "constant-arrival-rate"\nrate = 5e8\nduration = "10s"', "5,000,000,000"),
        ('executor = "constant-arrival-rate"\nrate = 100\nduration = "700h"', "252,000,000"),
        # One past the bound: 10,000 req/s for six minutes is the most a run plans.
        ('executor = "constant-arrival-rate"\nrate = 10000.003\nduration = "360s"',
         "3,600,002"),
        ('executor = "ramping-arrival-rate"\nstages = [{duration = "720s", target = 10000.01}]',
         "3,600,004"),
    ],
)  # fmt: skip
def test_a_schedule_past_the_bound_is_refused_before_it_is_allocated(
    tmp_path: Path, load: str, asked: str
) -> None:
    with pytest.raises(UsageError) as info:
        make_plan(_options(_file(tmp_path, load)))
    assert info.value.message == f"the load asks for {asked} requests (rate x duration); {REQUESTS}"
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("scenario", ["smoke", "closed-loop"])
def test_a_duration_scale_past_30_days_is_refused(scenario: str) -> None:
    with pytest.raises(UsageError) as info:
        make_plan(_options(scenario, duration_scale=1e308))
    assert info.value.message == (
        "the load lasts inf s; a run lasts at most 2,592,000 s (30 days): shorten its stages "
        "(or --duration-scale)"
    )


def test_a_load_past_30_days_is_refused(tmp_path: Path) -> None:
    load = 'executor = "constant-vus"\nvus = 2\nduration = "100000h"'
    with pytest.raises(UsageError) as info:
        make_plan(_options(_file(tmp_path, load)))
    assert info.value.message.startswith("the load lasts 3.6e+08 s; a run lasts at most")


def test_the_largest_schedule_allowed_still_plans(tmp_path: Path) -> None:
    load = 'executor = "constant-arrival-rate"\nrate = 10000\nduration = "360s"'  # 3,600,000
    assert make_plan(_options(_file(tmp_path, load))).load.offered == 3_600_000


USERS = "a run holds at most 100,000: lower it (or --rate-scale)"


@pytest.mark.parametrize(
    ("load", "what"),
    [
        ('executor = "sessions"\nusers = 1e9\nturns = 2\nduration = "10s"', "1e+09 session users"),
        ('executor = "constant-vus"\nvus = 1e9\nduration = "10s"', "1e+09 virtual users"),
        ('executor = "ramping-vus"\nstages = [{duration = "1s", target = 1e9}]',
         "1e+09 virtual users"),
    ],
)  # fmt: skip
def test_users_past_the_bound_are_refused_before_they_are_allocated(
    tmp_path: Path, load: str, what: str
) -> None:
    # Unbounded, `users = 1e9` took 21 GiB before the kernel stopped it (#44 item 1).
    with pytest.raises(UsageError) as info:
        make_plan(_options(_file(tmp_path, load)))
    assert info.value.message == f"the load asks for {what} at once; {USERS}"


@pytest.mark.parametrize(
    ("load", "what"),
    [
        ('executor = "sessions"\nusers = 8\nturns = 2\nduration = "10s"', "session users"),
        ('executor = "constant-vus"\nvus = 8\nduration = "10s"', "virtual users"),
    ],
)
def test_a_rate_scale_past_the_users_bound_is_refused(tmp_path: Path, load: str, what: str) -> None:
    with pytest.raises(UsageError) as info:
        make_plan(_options(_file(tmp_path, load), rate_scale=1e308))
    assert info.value.message == f"the load asks for inf {what} at once; {USERS}"


@pytest.mark.parametrize(
    ("load", "message"),
    [
        ('executor = "sessions"\nrate = 1e308\nturns = 2\nduration = "10s"',
         f"inf requests (rate x duration x turns); {REQUESTS}"),
        ('executor = "sessions"\nrate = 1e-300\nturns = 2\nduration = "2s"',
         "4e-300 requests (rate x duration x turns); a run plans at least one: raise the rate "
         "or the duration (or --rate-scale, --duration-scale)"),
        ('executor = "constant-arrival-rate"\nrate = 1e-300\nduration = "2s"',
         "2e-300 requests (rate x duration); a run plans at least one: raise the rate "
         "or the duration (or --rate-scale, --duration-scale)"),
    ],
)  # fmt: skip
def test_sessions_and_rates_that_plan_no_request_or_too_many_are_refused(
    tmp_path: Path, load: str, message: str
) -> None:
    # Once exit 5 after the target was contacted (#44 item 5).
    with pytest.raises(UsageError) as info:
        make_plan(_options(_file(tmp_path, load)))
    assert info.value.message == f"the load asks for {message}"


def test_the_most_users_allowed_still_plan(tmp_path: Path) -> None:
    load = 'executor = "constant-vus"\nvus = 100000\nduration = "10s"'
    plan = make_plan(_options(_file(tmp_path, load)))
    assert plan.scenario.load.concurrency_guess() == 100_000
