"""`zqbench sweep SCENARIO`: capacity at SLO, one line per step."""

from __future__ import annotations

from typing import Annotated

import typer

from zqbench.cli.options import (
    ApiKeyEnvOpt,
    ApiOpt,
    HeadersOpt,
    MaxContextOpt,
    MaxScheduleLagOpt,
    MinAchievedRatioOpt,
    MinRatioSamplesOpt,
    MinSamplesOpt,
    ModelOpt,
    OutOpt,
    ScenarioArg,
    SeedOpt,
    ServerEngineOpt,
    ServerMetricsOpt,
    ServerSchedulerOpt,
    SlosOpt,
    StrictModelOpt,
    TargetOpt,
    fields_of,
)
from zqbench.option_values import (
    ServerEngine,
    ServerScheduler,
)


def sweep(
    ctx: typer.Context,
    scenario: ScenarioArg = "sweep",
    target: TargetOpt = None,
    api: ApiOpt = None,
    model: ModelOpt = None,
    strict_model: StrictModelOpt = False,
    headers: HeadersOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    slos: SlosOpt = None,
    min_rate: Annotated[float | None, typer.Option(help="First rate (req/s).")] = None,
    max_rate: Annotated[float | None, typer.Option(help="Highest rate tried (req/s).")] = None,
    step_factor: Annotated[float | None, typer.Option(help="Ramp multiplier per step.")] = None,
    step_duration_s: Annotated[
        float | None, typer.Option("--step-duration", help="Seconds of constant load per step.")
    ] = None,
    bisect_steps: Annotated[
        int | None, typer.Option(help="Steps between the last pass and the first fail.")
    ] = None,
    out: OutOpt = None,
    max_context: MaxContextOpt = None,
    seed: SeedOpt = 0,
    server_scheduler: ServerSchedulerOpt = ServerScheduler.zero_queue,
    server_engine: ServerEngineOpt = ServerEngine.auto,
    html: Annotated[bool, typer.Option(help="Render report.html for every step.")] = True,
    min_samples: MinSamplesOpt = None,
    max_schedule_lag_s: MaxScheduleLagOpt = None,
    min_achieved_ratio: MinAchievedRatioOpt = None,
    min_ratio_samples: MinRatioSamplesOpt = None,
    server_metrics: ServerMetricsOpt = True,
) -> None:
    """Capacity at SLO: the highest request rate at which the scenario's SLOs still hold.

    Exit 0 when a passing rate was found, 1 when even the lowest rate fails."""
    from zqbench.outputs.sweep import outcome
    from zqbench.pipeline.run import RunOptions
    from zqbench.pipeline.sweep import run_sweep
    from zqbench.scenario import SweepConfig
    from zqbench.summary import SweepStep

    def report(step: SweepStep) -> None:
        typer.echo(
            f"step {step.index:>2} {step.phase:<6} {step.rate:>9.4g} req/s: {step.verdict}",
            err=True,
        )

    options = RunOptions(**fields_of(RunOptions, ctx.params))
    overrides = fields_of(SweepConfig, ctx.params)
    result = run_sweep(options, overrides=overrides, on_step=report)
    typer.echo(outcome(result.report))
    typer.echo(f"outputs: {result.out_dir}")
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(sweep)
