"""`zqbench sweep`: capacity at SLO, the highest request rate at which the SLOs still hold.

Nominal throughput flatters a queueing server: it keeps "serving" past the point where
its latency SLOs break. The sweep measures the rate that matters instead. Every step is
a constant-arrival-rate copy of the scenario (same requests, mix and SLOs, one stage of
`step_duration`) run by `run_scenario` into its own folder:

1. ramp: start at `min_rate`, multiply by `step_factor` while the step passes, up to
   `max_rate`;
2. bisect: between the last passing and the first failing rate, `bisect_steps` times.

A step passes only with verdict `pass`: `fail`, `inconclusive` (too few samples to be
sure) and `invalid` (the generator could not hold the rate) do not. The knee is the
highest passing rate; with [stop] rules, a step a rule ended ends the search, and that
step is the knee (`by` "stop": where the target saturated). Outputs
(`zqbench.outputs.sweep`): `sweep.json` (schema `zqbench.sweep/1`, the model
`zqbench.summary.SweepReport`), `sweep.md`, and one run folder per step. Without a
target, one embedded reference server (the target stage's) serves every step, not one per
step, so the steps see the same warm server.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from zqbench.option_values import check_above, check_at_least
from zqbench.outputs.paths import existing_ancestor, make_out_dir, removed_if_empty_on_error
from zqbench.outputs.registry import write_sweep
from zqbench.pipeline.options import RunOptions
from zqbench.pipeline.plan import prepare_scenario
from zqbench.pipeline.run import run_scenario
from zqbench.pipeline.target import embedded_server
from zqbench.redact import redact_url
from zqbench.scenario import Scenario, SweepConfig
from zqbench.summary import (
    Knee,
    StepSlo,
    Summary,
    SweepPhase,
    SweepReport,
    SweepSettings,
    SweepStep,
)

StepCallback = Callable[[SweepStep], None]


@dataclass(frozen=True, slots=True)
class SweepResult:
    out_dir: Path
    report: SweepReport
    exit_code: int  # 0: a passing rate was found; 1: none


def sweep_config(
    scenario: Scenario, overrides: Mapping[str, float | None] | None = None
) -> SweepConfig:
    """The scenario's [sweep] table (else the defaults), with the fields `overrides` gives
    (None: keep), checked: 0 < min_rate <= max_rate, step_factor > 1, step_duration_s > 0,
    bisect_steps >= 0."""
    given: dict[str, Any] = {k: v for k, v in (overrides or {}).items() if v is not None}
    config = dataclasses.replace(scenario.sweep or SweepConfig(), **given)
    check_above("min_rate", config.min_rate, 0)
    check_at_least("max_rate", config.max_rate, config.min_rate)
    check_above("step_factor", config.step_factor, 1)
    check_above("step_duration_s", config.step_duration_s, 0)
    check_at_least("bisect_steps", config.bisect_steps, 0)
    return config


def step_scenario(scenario: Scenario, rate: float, duration_s: float) -> Scenario:
    """The scenario as one constant-rate stage: same requests, mix, SLOs and arrivals."""
    constant = scenario.load.at_constant_rate(rate, duration_s, f"{rate:g} req/s")
    # The network impairment names stages of the original plan; a step has one stage.
    return dataclasses.replace(scenario, load=constant, network=None)


def _step_record(
    index: int, rate: float, phase: SweepPhase, summary: Summary, out: Path
) -> SweepStep:
    latency, ttft = summary.metrics["latency"], summary.metrics["ttft"]
    return SweepStep(
        index=index,
        phase=phase,
        rate=rate,
        verdict=summary.verdict,
        passed=summary.verdict == "pass",
        sent=summary.requests.sent,
        failed=summary.requests.failed,
        achieved_rate=summary.load.achieved_rate,
        latency_p50=latency.p50,
        latency_p99=latency.p99,
        ttft_p50=ttft.p50,
        ttft_p99=ttft.p99,
        slos=[StepSlo(expr=s.expr, verdict=s.verdict) for s in summary.slos],
        validity_reasons=summary.validity.reasons,
        out_dir=out.name,
        stopped=None
        if summary.stop is None or not summary.stop.events
        else (summary.stop.events[0].reason),
    )


def plan_next(config: SweepConfig, steps: list[SweepStep]) -> tuple[float, SweepPhase] | None:
    """The next (rate, phase) from the steps so far, or None when the search is done."""
    if not steps:
        return config.min_rate, "ramp"
    if any(s.stopped is not None for s in steps):
        return None  # a [stop] rule found the target saturated: that step is the knee
    passed = [s.rate for s in steps if s.passed]
    failed = [s.rate for s in steps if not s.passed]
    if not passed:
        return None  # even the lowest rate fails: no capacity at SLO
    lo = max(passed)
    above = [r for r in failed if r > lo]
    if not above:
        if lo >= config.max_rate:
            return None
        return min(lo * config.step_factor, config.max_rate), "ramp"
    bisected = sum(1 for s in steps if s.phase == "bisect")
    if bisected >= config.bisect_steps:
        return None
    return (lo + min(above)) / 2, "bisect"


def run_sweep(
    options: RunOptions,
    *,
    overrides: Mapping[str, float | None] | None = None,
    on_step: StepCallback | None = None,
) -> SweepResult:
    """Search the knee; `overrides` replace fields of the scenario's [sweep] table."""
    # The plan stage's checks, before any traffic.
    scenario, _ = prepare_scenario(options.plan, options.endpoint)
    config = sweep_config(scenario, overrides)
    started = datetime.now(timezone.utc)
    out = options.output
    kept = existing_ancestor(Path(out.out) if out.out else out.reports_root)
    out_dir = make_out_dir(out.out, f"sweep-{scenario.name}", now=started, root=out.reports_root)
    with removed_if_empty_on_error(out_dir, kept), _shared_target(options, out_dir) as base:
        steps = _search(base, scenario, config, out_dir, on_step)
    knee = find_knee(steps)
    report = SweepReport(
        scenario=scenario.name,
        target=redact_url(base.endpoint.target or ""),
        started_at=started.isoformat(timespec="seconds"),
        slos=[*scenario.slo, *options.plan.slos],
        config=SweepSettings(**dataclasses.asdict(config)),
        steps=steps,
        curve=sorted(steps, key=lambda s: s.rate),
        knee=knee,
    )
    write_sweep(out_dir, report)
    return SweepResult(out_dir, report, 0 if knee else 1)


def find_knee(steps: list[SweepStep]) -> Knee | None:
    """The first step a [stop] rule ended, else the highest passing rate; None: neither."""
    stopped = [s for s in steps if s.stopped is not None]
    if stopped:
        return Knee(rate=stopped[0].rate, step=stopped[0].index, by="stop")
    passing = [s for s in steps if s.passed]
    if not passing:
        return None
    best = max(passing, key=lambda s: s.rate)
    return Knee(rate=best.rate, step=best.index)


@contextlib.contextmanager
def _shared_target(options: RunOptions, out_dir: Path) -> Iterator[RunOptions]:
    """The options every step runs with: without a target, one embedded server serves
    every step, so the steps see the same warm server."""
    if options.endpoint.target is not None:
        yield options
        return
    log_path = out_dir / "reference_server.log"
    with embedded_server(options.server, log_path, pin_cpus=False) as server:
        model = options.endpoint.model or str(server.health["model"])
        endpoint = dataclasses.replace(options.endpoint, target=server.base_url, model=model)
        yield dataclasses.replace(options, endpoint=endpoint)


def _search(
    base: RunOptions,
    scenario: Scenario,
    config: SweepConfig,
    out_dir: Path,
    on_step: StepCallback | None,
) -> list[SweepStep]:
    """Run steps until `plan_next` says the knee is found; one run folder per step."""
    steps: list[SweepStep] = []
    while (nxt := plan_next(config, steps)) is not None:
        rate, phase = nxt
        index = len(steps)
        step_out = out_dir / f"step-{index:02d}-{rate:g}rps"
        plan = dataclasses.replace(
            base.plan,
            scenario=step_scenario(scenario, rate, config.step_duration_s),
            rate_scale=1.0,
            duration_scale=1.0,
        )
        output = dataclasses.replace(base.output, out=step_out)
        step = dataclasses.replace(base, plan=plan, output=output)
        result = run_scenario(step)
        steps.append(_step_record(index, rate, phase, result.summary, step_out))
        if on_step is not None:
            on_step(steps[-1])
    return steps
