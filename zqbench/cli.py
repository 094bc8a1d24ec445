"""The `zqbench` command line: parse flags, delegate to the library, map errors to exit codes.

This is the only module that calls `sys.exit` and the only one that imports typer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from zqbench.errors import EXIT_TARGET, EXIT_USAGE, ZqbenchError

app = typer.Typer(
    name="zqbench",
    help="Benchmark and conformance harness for zero-queue LLM inference endpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(exc: ZqbenchError) -> None:
    typer.echo(f"zqbench: error: {exc.message}", err=True)
    raise typer.Exit(exc.exit_code)


@app.command()
def run(
    scenario: Annotated[
        str, typer.Argument(help="Bundled scenario name or a TOML path.")
    ] = "burst",
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the endpoint. Default: start the bundled reference server."),
    ] = None,
    api: Annotated[
        str | None, typer.Option(help="anthropic or openai (default: the scenario's).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name sent in each request.")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="Extra header 'Name: value'.")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key (never pass keys in argv)."),
    ] = None,
    http2: Annotated[bool, typer.Option("--http2", help="HTTP/2 (h2c or ALPN).")] = False,
    h1_client: Annotated[
        str, typer.Option(help="HTTP/1.1 transport: raw (fastest measured) or aiohttp.")
    ] = "raw",
    workers: Annotated[int, typer.Option(help="Processes that split the schedule.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the arrival and mix RNG.")] = 0,
    rate_scale: Annotated[float, typer.Option(help="Multiply every rate or VU count.")] = 1.0,
    duration_scale: Annotated[float, typer.Option(help="Multiply every duration.")] = 1.0,
    slo: Annotated[
        list[str] | None, typer.Option("--slo", help="Extra SLO, e.g. 'latency:p99<150ms'.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder.")] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Per-request timeout in seconds (overrides scenario).")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Override max_tokens.")] = None,
    max_connections: Annotated[int, typer.Option(help="Connection pool limit.")] = 1024,
    warm_connections: Annotated[
        int | None, typer.Option(help="Connections opened before the schedule starts.")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="Do not verify TLS certificates.")] = False,
    server_scheduler: Annotated[
        str, typer.Option(help="Embedded reference server: zero-queue or fifo.")
    ] = "zero-queue",
    server_engine: Annotated[
        str, typer.Option(help="Embedded reference server: auto, torch or sim.")
    ] = "auto",
    server_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--server-arg",
            help="Flag for the embedded server, e.g. --server-arg=--max-context=32768.",
        ),
    ] = None,
    inconclusive_ok: Annotated[
        bool, typer.Option(help="Exit 0 when SLOs are inconclusive rather than 1.")
    ] = False,
    max_context: Annotated[
        int | None,
        typer.Option(
            help="Clamp request classes whose prompt + max_tokens exceed this many tokens "
            "(default: the target's /health max_context, when it says)."
        ),
    ] = None,
    calibration: Annotated[
        str,
        typer.Option(
            help="Prompt sizing: auto (calibrate once per target, cached), fresh, or off."
        ),
    ] = "auto",
    telemetry: Annotated[
        list[str] | None,
        typer.Option(help="GPU telemetry: nvml, auto, or prometheus:URL; repeatable."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live view (CI logs).")] = False,
) -> None:
    """Drive a scenario against a target, measure, gate on SLOs and write the outputs."""
    from zqbench.run import RunOptions, run_scenario

    options = RunOptions(
        scenario=scenario,
        target=target,
        api=api,
        model=model,
        headers=tuple(header or ()),
        api_key_env=api_key_env,
        http2=http2,
        h1_client=h1_client,
        workers=workers,
        seed=seed,
        rate_scale=rate_scale,
        duration_scale=duration_scale,
        slos=tuple(slo or ()),
        out=out,
        timeout_s=timeout,
        max_tokens=max_tokens,
        max_connections=max_connections,
        warm_connections=warm_connections,
        insecure=insecure,
        server_scheduler=server_scheduler,
        server_engine=server_engine,
        server_args=tuple(server_arg or ()),
        inconclusive_fails=not inconclusive_ok,
        max_context=max_context,
        calibration=calibration,
        telemetry=tuple(telemetry or ()),
    )
    from zqbench.live_view import LiveView

    view = LiveView(enabled=not quiet)
    try:
        with view:
            result = run_scenario(options, on_progress=view.update, on_target=view.note)
    except ZqbenchError as exc:
        _fail(exc)
        return
    view.final(result.summary, result.out_dir)
    raise typer.Exit(result.exit_code)


@app.command()
def sweep(
    scenario: Annotated[
        str, typer.Argument(help="Bundled scenario name or a TOML path.")
    ] = "sweep",
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the endpoint. Default: start the bundled reference server."),
    ] = None,
    api: Annotated[
        str | None, typer.Option(help="anthropic or openai (default: the scenario's).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name sent in each request.")] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="Extra header 'Name: value'.")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key (never pass keys in argv)."),
    ] = None,
    slo: Annotated[
        list[str] | None, typer.Option("--slo", help="Extra SLO, e.g. 'latency:p99<150ms'.")
    ] = None,
    min_rate: Annotated[float | None, typer.Option(help="First rate (req/s).")] = None,
    max_rate: Annotated[float | None, typer.Option(help="Highest rate tried (req/s).")] = None,
    step_factor: Annotated[float | None, typer.Option(help="Ramp multiplier per step.")] = None,
    step_duration: Annotated[
        float | None, typer.Option(help="Seconds of constant load per step.")
    ] = None,
    bisect_steps: Annotated[
        int | None, typer.Option(help="Steps between the last pass and the first fail.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Output folder.")] = None,
    max_context: Annotated[
        int | None, typer.Option(help="Clamp request classes to this context (tokens).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the arrival and mix RNG.")] = 0,
    server_scheduler: Annotated[
        str, typer.Option(help="Embedded reference server: zero-queue or fifo.")
    ] = "zero-queue",
    server_engine: Annotated[
        str, typer.Option(help="Embedded reference server: auto, torch or sim.")
    ] = "auto",
    html: Annotated[bool, typer.Option(help="Render report.html for every step.")] = True,
) -> None:
    """Capacity at SLO: the highest request rate at which the scenario's SLOs still hold.

    Exit 0 when a passing rate was found, 1 when even the lowest rate fails."""
    import dataclasses

    from zqbench.errors import UsageError
    from zqbench.run import RunOptions
    from zqbench.scenario import SweepConfig, load_scenario
    from zqbench.sweep import run_sweep

    options = RunOptions(
        scenario=scenario,
        target=target,
        api=api,
        model=model,
        headers=tuple(header or ()),
        api_key_env=api_key_env,
        seed=seed,
        slos=tuple(slo or ()),
        out=out,
        max_context=max_context,
        server_scheduler=server_scheduler,
        server_engine=server_engine,
        html=html,
    )
    try:
        config = load_scenario(scenario).sweep or SweepConfig()
        flags = {
            "min_rate": min_rate,
            "max_rate": max_rate,
            "step_factor": step_factor,
            "step_duration_s": step_duration,
            "bisect_steps": bisect_steps,
        }
        config = dataclasses.replace(config, **{k: v for k, v in flags.items() if v is not None})
        if not (0 < config.min_rate <= config.max_rate and config.step_factor > 1):
            raise UsageError("sweep needs 0 < --min-rate <= --max-rate and --step-factor > 1")
        if config.step_duration_s <= 0 or config.bisect_steps < 0:
            raise UsageError("sweep needs --step-duration > 0 and --bisect-steps >= 0")

        def report(step: dict[str, Any]) -> None:
            typer.echo(
                f"step {step['index']:>2} {step['phase']:<6} {step['rate']:>9.4g} req/s: "
                f"{step['verdict']}",
                err=True,
            )

        result = run_sweep(options, sweep=config, on_step=report)
    except ZqbenchError as exc:
        _fail(exc)
        return
    knee = result.report["knee"]
    typer.echo(f"capacity at SLO: {knee['rate']:g} req/s" if knee else "no passing rate: SLOs fail")
    typer.echo(f"outputs: {result.out_dir}")
    raise typer.Exit(result.exit_code)


@app.command()
def scenarios(
    name: Annotated[str | None, typer.Argument(help="Show this scenario's file.")] = None,
) -> None:
    """List the bundled scenarios, or show one."""
    from zqbench.scenario import list_bundled, load_scenario

    try:
        if name is None:
            for scenario_name, description in list_bundled():
                typer.echo(f"{scenario_name:<16} {description}")
            return
        scenario = load_scenario(name)
    except ZqbenchError as exc:
        _fail(exc)
        return
    typer.echo(Path(scenario.source).read_text(encoding="utf-8"), nl=False)


@app.command()
def probe(
    target: Annotated[str, typer.Option(help="Base URL of the endpoint.")],
    n: Annotated[int, typer.Option("-n", help="Sequential requests.")] = 100,
    api: Annotated[str, typer.Option(help="anthropic or openai.")] = "anthropic",
    model: Annotated[str, typer.Option(help="Model name.")] = "refserver",
    max_tokens: Annotated[int, typer.Option(help="max_tokens per request.")] = 16,
    prompt_tokens: Annotated[int, typer.Option(help="Prompt size in tokens.")] = 32,
    api_key_env: Annotated[str | None, typer.Option(help="Variable holding the API key.")] = None,
    header: Annotated[list[str] | None, typer.Option("--header", "-H")] = None,
    http2: Annotated[bool, typer.Option("--http2")] = False,
    fresh: Annotated[bool, typer.Option(help="A new connection for every request.")] = False,
    stream: Annotated[bool, typer.Option(help="Streaming requests.")] = True,
    timeout: Annotated[float, typer.Option(help="Per-request timeout, seconds.")] = 30.0,
) -> None:
    """Sequential requests with a curl-style breakdown and P50/P99: does this endpoint queue?"""
    from zqbench.probe import ProbeOptions, format_probe, run_probe

    options = ProbeOptions(
        target=target,
        n=n,
        api=api,
        model=model,
        max_tokens=max_tokens,
        prompt_tokens=prompt_tokens,
        api_key_env=api_key_env,
        headers=tuple(header or ()),
        http2=http2,
        fresh_connections=fresh,
        stream=stream,
        timeout_s=timeout,
    )
    try:
        report = run_probe(options)
    except ZqbenchError as exc:
        _fail(exc)
        return
    typer.echo(format_probe(report))
    raise typer.Exit(0 if report.ok else 1)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def serve(ctx: typer.Context) -> None:
    """Start the bundled reference server (all flags go to `python -m reference_server`)."""
    args: list[Any] = [sys.executable, "-m", "reference_server", *ctx.args]
    proc = subprocess.Popen(args, env=os.environ.copy())
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        code = proc.wait()
    raise typer.Exit(code)


def _register_command_groups() -> None:
    """Commands that live in their own CLI modules (reports, conformance, impairment)."""
    from zqbench import cli_conform, cli_impair, cli_reports

    for group in (cli_reports, cli_conform, cli_impair):
        group.register(app)


_register_command_groups()


def main() -> None:
    try:
        app()
    except ZqbenchError as exc:  # anything that escaped a command still gets one line
        print(f"zqbench: error: {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)
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
        sys.exit(EXIT_TARGET)


if __name__ == "__main__":
    main()
