"""Stage 1, plan: scenario + options -> `Plan`, what the run will send and when.

The scenario is loaded, scaled and overridden by the options, its SLOs are parsed (a bad
one fails here, before any traffic), and the schedule is split into one `Work` per worker.
Nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from zqbench.engines.native import ClosedLoopWork, OpenLoopWork
from zqbench.engines.workers import Work
from zqbench.errors import OptionError
from zqbench.load.closed_loop import vu_plan
from zqbench.load.mix import assign_classes
from zqbench.load.open_loop import arrival_times
from zqbench.load.spans import StageInfo
from zqbench.metrics.slo import parse_slo
from zqbench.pipeline.options import RunOptions
from zqbench.scenario import LoadConfig, Scenario, load_scenario


@dataclass(frozen=True)
class Plan:
    scenario: Scenario  # loaded, scaled and overridden; prompts not yet fitted to a target
    slos: tuple[str, ...]  # the scenario's, then the options'
    works: list[Work]  # the schedule, one part per worker
    offered: int  # open loop: requests scheduled; closed loop: 0 (not known in advance)
    offered_rate: float  # open loop: mean req/s of the schedule; closed loop: 0
    stages: list[StageInfo]
    started_at: datetime  # UTC: names the output folder and labels the summary


def make_plan(options: RunOptions) -> Plan:
    scenario = prepare_scenario(options)
    if scenario.load.open_loop:
        works, offered, rate, stages = _open_loop(scenario, options)
    else:
        works, offered, rate, stages = _closed_loop(scenario, options)
    return Plan(
        scenario=scenario,
        slos=(*scenario.slo, *options.slos),
        works=works,
        offered=offered,
        offered_rate=rate,
        stages=stages,
        started_at=datetime.now(timezone.utc),
    )


def prepare_scenario(options: RunOptions) -> Scenario:
    """Load, scale and override the scenario; parse every SLO it will be gated on."""
    loaded = options.scenario
    if not isinstance(loaded, Scenario):
        loaded = load_scenario(loaded)
    scenario = loaded.scaled(rate_scale=options.rate_scale, duration_scale=options.duration_scale)
    named = None if options.api is None else options.api.api()  # None: the scenario's, or auto
    scenario = scenario.with_overrides(
        api=None if named is None else named.value,
        max_tokens=options.max_tokens,
        timeout_s=options.timeout_s,
    )
    for expr in (*scenario.slo, *options.slos):
        parse_slo(expr)  # a bad expression fails before any traffic (exit 2)
    if scenario.request.cold_connections and options.http2:
        raise OptionError(
            "http2",
            "the scenario sets cold_connections = true, a new connection per request; "
            "HTTP/2 shares one: drop --http2",
        )
    return scenario


def _stage_name(load: LoadConfig, index: int) -> str:
    return load.stages[index].name or f"stage {index}"


def _open_loop(
    scenario: Scenario, options: RunOptions
) -> tuple[list[Work], int, float, list[StageInfo]]:
    """Arrival times drawn up front, each request's class with them, split across workers."""
    load, mix = scenario.load, scenario.request.mix
    schedule = arrival_times(load, options.seed)
    classes = assign_classes(
        mix,
        schedule.offered,
        options.seed,
        stage=schedule.stage,
        stage_mixes=[s.mix for s in load.stages],
    )
    works: list[Work] = [
        OpenLoopWork(
            request_ids=part.request_ids,
            times_ns=part.times_ns,
            stages=part.stage,
            classes=classes[part.request_ids].astype(np.int32),
        )
        for part in schedule.split(options.workers)
    ]
    stages = [
        StageInfo(_stage_name(load, i), a / 1e9, b / 1e9, load.stages[i].target, load.stages[i].mix)
        for i, (a, b) in enumerate(schedule.stage_bounds_ns)
    ]
    duration_s = schedule.duration_ns / 1e9
    rate = schedule.offered / duration_s if duration_s else 0.0
    return works, schedule.offered, rate, stages


def _closed_loop(
    scenario: Scenario, options: RunOptions
) -> tuple[list[Work], int, float, list[StageInfo]]:
    """Virtual users: every worker gets the whole plan and runs its share of the VUs."""
    load = scenario.load
    plan = vu_plan(load)
    works: list[Work] = [
        ClosedLoopWork(plan=plan, mix=scenario.request.mix, seed=options.seed)
        for _ in range(options.workers)
    ]
    bounds = plan.bounds_ns
    stages = [
        StageInfo(_stage_name(load, i), bounds[i] / 1e9, bounds[i + 1] / 1e9)
        for i in range(len(bounds) - 1)
    ]
    return works, 0, 0.0, stages
