"""The `zqbench` command line: parse flags into the library's options and call the library.

Commands hold no logic and no error handling: the options are checked by the library, and
`zqbench.cli.boundary` turns any ZqbenchError into one line and its exit code. `main` is
the only caller of `sys.exit`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from zqbench.cli.boundary import CommandGroup
from zqbench.cli.options import (
    ApiKeyEnvOpt,
    ApiOpt,
    CalibrationOpt,
    H1ClientOpt,
    HeadersOpt,
    Http2Opt,
    InconclusiveOkOpt,
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
    choice_option,
    fields_of,
)
from zqbench.errors import EXIT_INTERNAL, EXIT_USAGE
from zqbench.option_values import (
    ApiChoice,
    CalibrationMode,
    H1Client,
    ServerEngine,
    ServerScheduler,
)

app = typer.Typer(
    name="zqbench",
    help="Benchmark and conformance harness for zero-queue LLM inference endpoints.",
    cls=CommandGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zqbench {version()}")
        raise typer.Exit(0)


def version() -> str:
    """The installed distribution's version, else the package's own."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("zqbench")
    except PackageNotFoundError:
        from zqbench import __version__

        return __version__


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Benchmark and conformance harness for zero-queue LLM inference endpoints."""


@app.command()
def run(
    ctx: typer.Context,
    scenario: ScenarioArg = "burst",
    target: TargetOpt = None,
    api: ApiOpt = None,
    model: ModelOpt = None,
    strict_model: StrictModelOpt = False,
    headers: HeadersOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    http2: Http2Opt = False,
    h1_client: H1ClientOpt = H1Client.raw,
    workers: Annotated[int, typer.Option(help="Processes that split the schedule.")] = 1,
    seed: SeedOpt = 0,
    rate_scale: Annotated[float, typer.Option(help="Multiply every rate or VU count.")] = 1.0,
    duration_scale: Annotated[float, typer.Option(help="Multiply every duration.")] = 1.0,
    slos: SlosOpt = None,
    out: OutOpt = None,
    timeout_s: Annotated[
        float | None,
        typer.Option("--timeout", help="Per-request timeout in seconds (overrides scenario)."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Override max_tokens.")] = None,
    max_connections: Annotated[int, typer.Option(help="Connection pool limit.")] = 1024,
    warm_connections: Annotated[
        int | None, typer.Option(help="Connections opened before the schedule starts.")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="Do not verify TLS certificates.")] = False,
    server_scheduler: ServerSchedulerOpt = ServerScheduler.zero_queue,
    server_engine: ServerEngineOpt = ServerEngine.auto,
    server_args: Annotated[
        list[str] | None,
        typer.Option(
            "--server-arg",
            help="Flag for the embedded server, e.g. --server-arg=--max-context=32768.",
        ),
    ] = None,
    inconclusive_ok: InconclusiveOkOpt = False,
    max_context: MaxContextOpt = None,
    calibration: CalibrationOpt = CalibrationMode.auto,
    telemetry: Annotated[
        list[str] | None,
        typer.Option(help="GPU telemetry: nvml, auto, or prometheus:URL; repeatable."),
    ] = None,
    server_metrics: ServerMetricsOpt = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live view (CI logs).")] = False,
    min_samples: MinSamplesOpt = None,
    max_schedule_lag_s: MaxScheduleLagOpt = None,
    min_achieved_ratio: MinAchievedRatioOpt = None,
    min_ratio_samples: MinRatioSamplesOpt = None,
    distributed: Annotated[
        bool, typer.Option(help="Split the load over `zqbench worker`s (Locust's runners).")
    ] = False,
    expect_workers: Annotated[
        int, typer.Option(help="--distributed: workers to wait for; each runs a share.")
    ] = 1,
    master_bind: Annotated[
        str, typer.Option(help="--distributed: HOST:PORT the workers connect to.")
    ] = "*:5557",
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

    options = RunOptions(
        **fields_of(RunOptions, ctx.params), inconclusive_fails=not inconclusive_ok
    )
    view = LiveView(enabled=not quiet)
    with view:
        result = run_scenario(options, on_progress=view.update, on_target=view.note)
    view.final(result.summary, result.out_dir)
    raise typer.Exit(result.exit_code)


@app.command()
def worker(
    master: Annotated[str, typer.Option(help="The master's HOST[:PORT] (port 5557 if none).")],
    out: Annotated[
        Path, typer.Option(help="Each run's own sample file goes under OUT/<run>/.")
    ] = Path("reports/workers"),
    once: Annotated[bool, typer.Option(help="Serve one run, then exit.")] = False,
) -> None:
    """Run shares of `zqbench run --distributed` runs on this machine (a Locust worker)."""
    from zqbench.distributed.worker import WorkerOptions, serve

    def note(line: str) -> None:
        typer.echo(line, err=True)

    raise typer.Exit(serve(WorkerOptions(master=master, out=out, once=once), on_note=note))


@app.command()
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


@app.command()
def scenarios(
    name: Annotated[str | None, typer.Argument(help="Show this scenario's file.")] = None,
) -> None:
    """List the bundled scenarios, or show one."""
    from zqbench.scenario import list_bundled, load_scenario

    if name is None:
        for scenario_name, description in list_bundled():
            typer.echo(f"{scenario_name:<16} {description}")
        return
    scenario = load_scenario(name)
    typer.echo(Path(scenario.source).read_text(encoding="utf-8"), nl=False)


@app.command()
def probe(
    ctx: typer.Context,
    target: Annotated[str, typer.Option(help="Base URL of the endpoint.")],
    n: Annotated[int, typer.Option("-n", help="Sequential requests.")] = 100,
    api: Annotated[
        ApiChoice,
        choice_option(
            ApiChoice, "api", "The API the target speaks; auto: one small request per API."
        ),
    ] = ApiChoice.auto,
    model: ModelOpt = None,
    strict_model: StrictModelOpt = False,
    max_tokens: Annotated[int, typer.Option(help="max_tokens per request.")] = 16,
    prompt_tokens: Annotated[int, typer.Option(help="Prompt size in tokens.")] = 32,
    api_key_env: ApiKeyEnvOpt = None,
    headers: HeadersOpt = None,
    http2: Http2Opt = False,
    fresh_connections: Annotated[
        bool, typer.Option("--fresh/--no-fresh", help="A new connection for every request.")
    ] = False,
    stream: Annotated[
        bool,
        typer.Option(help="Streaming requests; with --no-stream TTFT is the body's arrival."),
    ] = True,
    timeout_s: Annotated[
        float, typer.Option("--timeout", help="Per-request timeout, seconds.")
    ] = 30.0,
) -> None:
    """Sequential requests with a curl-style breakdown and P50/P99: does this endpoint queue?"""
    from zqbench.target.probe import ProbeOptions, format_probe, run_probe

    def note(line: str) -> None:
        typer.echo(line, err=True)

    report = run_probe(ProbeOptions(**fields_of(ProbeOptions, ctx.params)), on_note=note)
    typer.echo(format_probe(report))
    raise typer.Exit(0 if report.ok else 1)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def serve(ctx: typer.Context) -> None:
    """Start the bundled reference server (all flags go to `python -m reference_server`)."""
    # Exec, not a child: this process becomes the server, so every signal (SIGTERM,
    # Ctrl-C, even SIGKILL) reaches the server itself and nothing is left to outlive us.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "reference_server", *ctx.args])


def _register_command_groups() -> None:
    """Commands that live in their own CLI modules (reports, conformance, impairment)."""
    from zqbench.cli import conform, impair, profile, reports

    for group in (reports, conform, impair, profile):
        group.register(app)


_register_command_groups()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug: one line for the user, the traceback on request
        if os.environ.get("ZQBENCH_DEBUG"):
            raise
        print(
            f"zqbench: internal error: {type(exc).__name__}: {exc} "
            "(set ZQBENCH_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
