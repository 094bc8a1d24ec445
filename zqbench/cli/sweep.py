"""`zqbench sweep SCENARIO`: capacity at SLO, one line per step; with `--server-cmd`, the
server setting to run (zqbench.pipeline.advise), one line per setting."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from zqbench.cli import groups as g
from zqbench.cli import options as opt


@opt.takes(
    g.ENDPOINT.only(
        "target", "api", "model", "strict_model", "headers", "api_key_env", "max_context"
    ),
    g.PLAN.only("seed", "slos", "rate_scale", "duration_scale", "max_tokens"),
    g.OUTPUT.only("out", "html"),
    g.SERVER.only("server_scheduler", "server_engine"),
    g.VALIDITY,
    g.BESIDE.only("server_metrics"),
)
def sweep(
    ctx: typer.Context,
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
    server_cmd: Annotated[
        str | None,
        typer.Option(
            help="Sweep server settings instead of rates: the server's command line, launched "
            "once per setting (no shell), {NAME} filled from --server-param, {port} with "
            "--target's port (or, without --target, a free loopback port).",
        ),
    ] = None,
    server_params: Annotated[
        list[str] | None,
        typer.Option(
            "--server-param",
            help="--server-cmd: NAME=V1,V2,... (repeatable; several: every combination).",
        ),
    ] = None,
    ready_timeout_s: Annotated[
        float | None,
        opt.duration_option(
            "--ready-timeout",
            "ready_timeout_s",
            "--server-cmd: how long each launch may take to answer GET /health, e.g. 2m "
            "(default 5m).",
        ),
    ] = None,
    **groups: Any,
) -> None:
    """Capacity at SLO: the highest request rate at which the scenario's SLOs still hold.
    With --server-cmd: the server setting with the highest admitted throughput whose SLOs
    hold, each setting launched, measured with the scenario as it is, and stopped.

    Exit 0 when a passing rate (setting) was found, 1 when none passes; with --server-cmd,
    3 when no setting's server came to serve."""
    if server_cmd is not None:
        _advise(ctx, server_cmd, server_params or [], ready_timeout_s, groups)
        return
    for name in ("server_params", "ready_timeout_s"):
        opt.refuse_given(ctx, name, "is --server-cmd's: give --server-cmd too, or drop {flag}")
    for name in ("rate_scale", "duration_scale"):
        opt.refuse_given(
            ctx,
            name,
            "scales the scenario each --server-cmd setting runs; a rate sweep sets each "
            "step's rate and length (--min-rate, --max-rate, --step-duration): drop {flag}",
        )
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


RATE_SEARCH = ("min_rate", "max_rate", "step_factor", "step_duration_s", "bisect_steps")


def _advise(
    ctx: typer.Context,
    server_cmd: str,
    server_params: list[str],
    ready_timeout_s: float | None,
    groups: dict[str, Any],
) -> None:
    """`zqbench sweep --server-cmd`: each setting's line as it finishes, then the outcome."""
    from zqbench.outputs.advice import setting_line
    from zqbench.pipeline.advise import AdviseOptions, run_advisor
    from zqbench.pipeline.run import RunOptions

    for name in RATE_SEARCH:
        opt.refuse_given(
            ctx,
            name,
            "is a rate sweep's; with --server-cmd each setting runs the scenario as it is "
            "(scale it with --rate-scale and --duration-scale): drop {flag}",
        )
    for name in opt.EMBEDDED_ONLY:
        problem = "sets up the bundled reference server, which --server-cmd replaces: drop {flag}"
        opt.refuse_given(ctx, name, problem)
    advise = AdviseOptions(**opt.fields_of(AdviseOptions, locals()))
    result = run_advisor(
        RunOptions(**groups), advise, on_setting=lambda s: typer.echo(setting_line(s), err=True)
    )
    typer.echo(result.report.outcome)
    typer.echo(f"outputs: {result.out_dir}")
    raise typer.Exit(result.exit_code)
