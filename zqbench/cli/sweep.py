"""`zqbench sweep SCENARIO`: capacity at SLO, one line per step."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from zqbench.cli import groups as g
from zqbench.cli import options as opt


@opt.takes(
    g.ENDPOINT.only(
        "target", "api", "model", "strict_model", "headers", "api_key_env", "max_context"
    ),
    g.PLAN.only("seed", "slos"),
    g.OUTPUT.only("out", "html"),
    g.SERVER.only("server_scheduler", "server_engine"),
    g.VALIDITY,
    g.BESIDE.only("server_metrics"),
)
def sweep(
    scenario: opt.ScenarioArg = "sweep",
    min_rate: Annotated[float | None, typer.Option(help="First rate (req/s).")] = None,
    max_rate: Annotated[float | None, typer.Option(help="Highest rate tried (req/s).")] = None,
    step_factor: Annotated[float | None, typer.Option(help="Ramp multiplier per step.")] = None,
    step_duration_s: Annotated[
        float | None, typer.Option("--step-duration", help="Seconds of constant load per step.")
    ] = None,
    bisect_steps: Annotated[
        int | None, typer.Option(help="Steps between the last pass and the first fail.")
    ] = None,
    **groups: Any,
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

    options = RunOptions(**groups)
    overrides = opt.fields_of(SweepConfig, locals())
    result = run_sweep(options, overrides=overrides, on_step=report)
    typer.echo(outcome(result.report))
    typer.echo(f"outputs: {result.out_dir}")
    raise typer.Exit(result.exit_code)
