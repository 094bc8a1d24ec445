"""Stage 1, plan: scenario + options -> `Plan`, what the run will send and when.

The scenario is loaded, scaled and overridden by the options, its SLOs are parsed (a bad
one fails here, before any traffic), and its executor plans the load: one `Work` per worker.
Nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from zqbench.errors import OptionError, UsageError
from zqbench.load import LoadPlan, Work
from zqbench.load.spans import StageInfo
from zqbench.metrics.slo import Slo, parse_slos
from zqbench.pipeline.options import PlanOptions, TargetOptions
from zqbench.scenario import Scenario, load_scenario
from zqbench.sources import check_source

MAX_RUN_S = 30 * 86_400  # nanosecond clocks and schedules stay far inside int64
NOTHING_NAMED = TargetOptions()  # no --api, no --http2: the scenario's own


@dataclass(frozen=True)
class Plan:
    scenario: Scenario  # loaded, scaled and overridden; prompts not yet fitted to a target
    slos: tuple[str, ...]  # the scenario's, then the options'
    slo_checks: tuple[Slo, ...]  # the same, parsed once (a bad one failed the plan)
    load: LoadPlan  # the executor's: one Work per worker, the stage spans, what was offered
    started_at: datetime  # UTC: names the output folder and labels the summary

    @property
    def works(self) -> list[Work]:
        return self.load.works

    @property
    def stages(self) -> list[StageInfo]:
        return self.load.stages

    @property
    def offered(self) -> int:
        """Requests scheduled; 0 when not known in advance (users wait for answers)."""
        return self.load.offered

    @property
    def offered_rate(self) -> float:
        return self.load.offered_rate


MAX_SEED = 2**63 - 1  # an int64, as every record that carries the seed holds it


def make_plan(options: PlanOptions, endpoint: TargetOptions = NOTHING_NAMED) -> Plan:
    """`endpoint`: its --api overrides the scenario's; its --http2 is checked against it."""
    scenario, slo_checks = prepare_scenario(options, endpoint)
    return Plan(
        scenario=scenario,
        slos=tuple(s.expr for s in slo_checks),
        slo_checks=slo_checks,
        load=scenario.load.plan(options.workers, options.seed),
        started_at=datetime.now(timezone.utc),
    )


def prepare_scenario(
    options: PlanOptions, endpoint: TargetOptions = NOTHING_NAMED
) -> tuple[Scenario, tuple[Slo, ...]]:
    """Load, scale and override the scenario; parse every SLO it will be gated on (the
    scenario's, then the options'), so a bad one fails before any traffic (exit 2)."""
    if not 0 <= options.seed <= MAX_SEED:
        # numpy's generators take no negative seed: -5 was exit 5 once the first prompt
        # was drawn, after the target was contacted.
        raise OptionError(
            "seed", f"must be a whole number from 0 to {MAX_SEED:,}", value=str(options.seed)
        )
    loaded = options.scenario
    if not isinstance(loaded, Scenario):
        loaded = load_scenario(loaded)
    scenario = loaded.scaled(rate_scale=options.rate_scale, duration_scale=options.duration_scale)
    if not scenario.load.duration_s <= MAX_RUN_S:  # NaN and inf fail too
        raise UsageError(
            f"the load lasts {scenario.load.duration_s:.3g} s; a run lasts at most "
            f"{MAX_RUN_S:,} s (30 days): shorten its stages (or --duration-scale)"
        )
    named = None if endpoint.api is None else endpoint.api.api()  # None: the scenario's, or auto
    scenario = scenario.with_overrides(
        api=None if named is None else named.value,
        max_tokens=options.max_tokens,
        timeout_s=options.timeout_s,
        graceful_stop_s=options.graceful_stop_s,
        dataset=options.dataset,
    )
    slo_checks = tuple(parse_slos((*scenario.slo, *options.slos)))
    check_source(scenario)
    if scenario.request.cold_connections and endpoint.http2:
        raise OptionError(
            "http2",
            "the scenario sets cold_connections = true, a new connection per request; "
            "HTTP/2 shares one: drop --http2",
        )
    return scenario, slo_checks
