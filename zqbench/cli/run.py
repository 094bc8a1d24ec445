"""`zqbench run SCENARIO`: flags to RunOptions, the live view, the run's exit code."""

from __future__ import annotations

from typing import Annotated

import typer

from zqbench.cli import options as opt
from zqbench.option_values import (
    CalibrationMode,
    H1Client,
    ServerEngine,
    ServerScheduler,
)


def run(
    ctx: typer.Context,
    scenario: opt.ScenarioArg = "burst",
    target: opt.TargetOpt = None,
    api: opt.ApiOpt = None,
    model: opt.ModelOpt = None,
    strict_model: opt.StrictModelOpt = False,
    headers: opt.HeadersOpt = None,
    api_key_env: opt.ApiKeyEnvOpt = None,
    http2: opt.Http2Opt = False,
    h1_client: opt.H1ClientOpt = H1Client.raw,
    workers: Annotated[int, typer.Option(help="Processes that split the schedule.")] = 1,
    seed: opt.SeedOpt = 0,
    rate_scale: opt.RateScaleOpt = 1.0,
    duration_scale: opt.DurationScaleOpt = 1.0,
    slos: opt.SlosOpt = None,
    out: opt.OutOpt = None,
    timeout_s: opt.RequestTimeoutOpt = None,
    max_tokens: opt.MaxTokensOpt = None,
    graceful_stop_s: opt.GracefulStopOpt = None,
    dataset: opt.DatasetOpt = None,
    max_connections: Annotated[int, typer.Option(help="Connection pool limit.")] = 1024,
    warm_connections: Annotated[
        int | None, typer.Option(help="Connections opened before the schedule starts.")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="Do not verify TLS certificates.")] = False,
    server_scheduler: opt.ServerSchedulerOpt = ServerScheduler.zero_queue,
    server_engine: opt.ServerEngineOpt = ServerEngine.auto,
    server_args: opt.ServerArgsOpt = None,
    inconclusive_ok: opt.InconclusiveOkOpt = False,
    max_context: opt.MaxContextOpt = None,
    calibration: opt.CalibrationOpt = CalibrationMode.auto,
    telemetry: Annotated[
        list[str] | None,
        typer.Option(help="GPU telemetry: nvml, auto, or prometheus:URL; repeatable."),
    ] = None,
    server_metrics: opt.ServerMetricsOpt = True,
    metrics_port: opt.MetricsPortOpt = None,
    metrics_host: opt.MetricsHostOpt = None,
    quiet: opt.QuietOpt = False,
    min_samples: opt.MinSamplesOpt = None,
    max_schedule_lag_s: opt.MaxScheduleLagOpt = None,
    min_achieved_ratio: opt.MinAchievedRatioOpt = None,
    min_ratio_samples: opt.MinRatioSamplesOpt = None,
    distributed: Annotated[
        bool, typer.Option(help="Split the load over `zqbench worker`s (Locust's runners).")
    ] = False,
    expect_workers: Annotated[
        int, typer.Option(help="--distributed: workers to wait for; each runs a share.")
    ] = 1,
    master_bind: opt.MasterBindOpt = "127.0.0.1:5557",
    secret_env: opt.SecretEnvOpt = None,
    worker_wait_s: Annotated[
        float, typer.Option("--worker-wait", help="--distributed: seconds to wait for them.")
    ] = 60.0,
    max_lost_share: Annotated[
        float,
        typer.Option(help="--distributed: share of the run lost with dead workers, still valid."),
    ] = 0.0,
    spin_us: Annotated[
        int,
        # Hidden: benchmarks measure CPU per request without the spin (0: sleep only).
        typer.Option(hidden=True, help="Spin this long before each open-loop send."),
    ] = 1500,
) -> None:
    """Drive a scenario against a target, measure, gate on SLOs and write the outputs."""
    from zqbench.cli.live_view import LiveView
    from zqbench.pipeline.run import RunOptions, run_scenario

    opt.refuse_embedded_options_with_target(ctx)
    options = RunOptions(
        **opt.fields_of(RunOptions, ctx.params), inconclusive_fails=not inconclusive_ok
    )
    view = LiveView(enabled=not quiet)
    with view:
        result = run_scenario(options, on_progress=view.update, on_target=view.note)
    view.final(result.summary, result.out_dir)
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(run)
