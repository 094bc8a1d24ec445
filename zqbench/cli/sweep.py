"""`zqbench sweep SCENARIO`: capacity at SLO, one line per step."""

from __future__ import annotations

from typing import Annotated

import typer

from zqbench.cli import options as opt
from zqbench.option_values import (
    ServerEngine,
    ServerScheduler,
)


def sweep(
    ctx: typer.Context,
    scenario: opt.ScenarioArg = "sweep",
    target: opt.TargetOpt = None,
    api: opt.ApiOpt = None,
    model: opt.ModelOpt = None,
    strict_model: opt.StrictModelOpt = False,
    headers: opt.HeadersOpt = None,
    api_key_env: opt.ApiKeyEnvOpt = None,
    slos: opt.SlosOpt = None,
    min_rate: Annotated[float | None, typer.Option(help="First rate (req/s).")] = None,
    max_rate: Annotated[float | None, typer.Option(help="Highest rate tried (req/s).")] = None,
    step_factor: Annotated[float | None, typer.Option(help="Ramp multiplier per step.")] = None,
    step_duration_s: Annotated[
        float | None, typer.Option("--step-duration", help="Seconds of constant load per step.")
    ] = None,
    bisect_steps: Annotated[
        int | None, typer.Option(help="Steps between the last pass and the first fail.")
    ] = None,
    out: opt.OutOpt = None,
    max_context: opt.MaxContextOpt = None,
    seed: opt.SeedOpt = 0,
    server_scheduler: opt.ServerSchedulerOpt = ServerScheduler.zero_queue,
    server_engine: opt.ServerEngineOpt = ServerEngine.auto,
    html: Annotated[bool, typer.Option(help="Render report.html for every step.")] = True,
    min_samples: opt.MinSamplesOpt = None,
    max_schedule_lag_s: opt.MaxScheduleLagOpt = None,
    min_achieved_ratio: opt.MinAchievedRatioOpt = None,
    min_ratio_samples: opt.MinRatioSamplesOpt = None,
    server_metrics: opt.ServerMetricsOpt = True,
) -> None:
    """Capacity at SLO: the highest request rate at which the scenario's SLOs still hold.

    Exit 0 when a passing rate was found, 1 when even the lowest rate fails."""
    from zqbench.outputs.sweep import outcome
    from zqbench.pipeline.run import RunOptions
    from zqbench.pipeline.sweep import run_sweep
    from zqbench.scenario import SweepConfig
    from zqbench.summary import SweepStep

    opt.refuse_embedded_options_with_target(ctx)

    def report(step: SweepStep) -> None:
        typer.echo(
            f"step {step.index:>2} {step.phase:<6} {step.rate:>9.4g} req/s: {step.verdict}",
            err=True,
        )

    options = RunOptions(**opt.fields_of(RunOptions, ctx.params))
    overrides = opt.fields_of(SweepConfig, ctx.params)
    result = run_sweep(options, overrides=overrides, on_step=report)
    typer.echo(outcome(result.report))
    typer.echo(f"outputs: {result.out_dir}")
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(sweep)
