"""The flags of each `RunOptions` group, declared once for `run`, `sweep` and `profile`.

A group's flags are the parameters of one function, each named after the group's field it
fills, and the function returns the fields (its `locals()`, or the few it renames): adding a
flag is a parameter here and a field of the group (zqbench/pipeline/options.py). A command
takes groups with `takes(PLAN, ENDPOINT, ...)` (zqbench/cli/options.py), whole or `.only(...)`
some of their flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from zqbench import option_values as values
from zqbench.cli import options as opt


def _plan(
    scenario: opt.ScenarioArg = "burst",
    workers: Annotated[int, typer.Option(help="Processes that split the schedule.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the arrival and mix RNG.")] = 0,
    rate_scale: Annotated[float, typer.Option(help="Multiply every rate or VU count.")] = 1.0,
    duration_scale: Annotated[float, typer.Option(help="Multiply every duration.")] = 1.0,
    slos: Annotated[
        list[str] | None, typer.Option("--slo", help="Extra SLO, e.g. 'latency:p99<150ms'.")
    ] = None,
    timeout_s: Annotated[
        float | None,
        typer.Option("--timeout", help="Per-request timeout in seconds (overrides scenario)."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Override max_tokens.")] = None,
    graceful_stop_s: Annotated[
        float | None,
        opt.duration_option(
            "--graceful-stop",
            "graceful_stop_s",
            "How long requests in flight may finish after the schedule ends, e.g. 5s "
            "(overrides the scenario's; default 30s).",
        ),
    ] = None,
    dataset: Annotated[
        str | None, typer.Option(help="Send a dataset file's rows as the requests.")
    ] = None,
) -> dict[str, Any]:
    return locals()


def _endpoint(
    target: opt.TargetOpt = None,
    api: Annotated[
        values.ApiChoice | None,
        opt.choice_option(
            values.ApiChoice,
            "api",
            "The API the target speaks. Default with --target: auto (one small request per API "
            "finds it, the scenario's preferred when both answer); without: the scenario's.",
        ),
    ] = None,
    model: opt.ModelOpt = None,
    strict_model: opt.StrictModelOpt = False,
    headers: opt.HeadersOpt = None,
    api_key_env: opt.ApiKeyEnvOpt = None,
    http2: opt.Http2Opt = False,
    insecure: Annotated[bool, typer.Option(help="Do not verify TLS certificates.")] = False,
    max_context: Annotated[
        int | None,
        typer.Option(
            help="Clamp request classes whose prompt + max_tokens exceed this many tokens "
            "(default: the target's /health max_context, when it says)."
        ),
    ] = None,
    calibration: Annotated[
        values.CalibrationMode,
        opt.choice_option(
            values.CalibrationMode,
            "calibration",
            "Prompt sizing: auto (calibrate once per target, cached), fresh, or off.",
        ),
    ] = values.CalibrationMode.auto,
) -> dict[str, Any]:
    return locals()


def _server(
    ctx: typer.Context,
    server_scheduler: opt.ServerSchedulerOpt = values.ServerScheduler.zero_queue,
    server_engine: Annotated[
        values.ServerEngine,
        opt.choice_option(
            values.ServerEngine, "server_engine", "Embedded reference server: compute engine."
        ),
    ] = values.ServerEngine.auto,
    server_args: Annotated[
        list[str] | None,
        typer.Option(
            "--server-arg",
            help="Flag for the embedded server, e.g. --server-arg=--max-context=32768.",
        ),
    ] = None,
) -> dict[str, Any]:
    opt.refuse_embedded_options_with_target(ctx)
    return locals()


def _connection(
    h1_client: Annotated[
        values.H1Client,
        opt.choice_option(
            values.H1Client, "h1_client", "HTTP/1.1 transport: raw (fastest measured) or aiohttp."
        ),
    ] = values.H1Client.raw,
    max_connections: Annotated[int, typer.Option(help="Connection pool limit.")] = 1024,
    warm_connections: Annotated[
        int | None, typer.Option(help="Connections opened before the schedule starts.")
    ] = None,
    spin_us: Annotated[
        int,
        # Hidden: benchmarks measure CPU per request without the spin (0: sleep only).
        typer.Option(hidden=True, help="Spin this long before each open-loop send."),
    ] = 1500,
) -> dict[str, Any]:
    return locals()


def _beside(
    telemetry: Annotated[
        list[str] | None,
        typer.Option(help="GPU telemetry: nvml, auto, or prometheus:URL; repeatable."),
    ] = None,
    server_metrics: Annotated[
        bool,
        typer.Option(
            "--server-metrics/--no-server-metrics",
            help="Scrape the target's /metrics during the run when it serves a known engine's "
            "(vLLM, SGLang, TGI, the reference server): the server's own queue.",
        ),
    ] = True,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the run so far as Prometheus metrics on this port (0: any free one) "
            "until the outputs are written; overrides the scenario's [metrics] port.",
        ),
    ] = None,
    metrics_host: Annotated[
        str | None,
        typer.Option(
            help="--metrics-port: the address to listen on; default 127.0.0.1. Another address "
            "shows the scenario, the target and the counts to that network, unauthenticated.",
        ),
    ] = None,
) -> dict[str, Any]:
    return locals()


def _validity(
    # None keeps the scenario's [validity], else zqbench's default.
    min_samples: Annotated[
        int | None, typer.Option(help="Fewest requests a valid run sends (default 100).")
    ] = None,
    max_schedule_lag_s: Annotated[
        float | None,
        opt.duration_option(
            "--max-schedule-lag",
            "max_schedule_lag_s",
            "Highest schedule_lag p99 of a valid run, e.g. 20ms (default 10ms).",
        ),
    ] = None,
    max_client_lag_s: Annotated[
        float | None,
        opt.duration_option(
            "--max-client-lag",
            "max_client_lag_s",
            "Highest client_lag p99 of a valid run: how late the client's event loop ran what "
            "was ready, e.g. 5ms (default 50ms).",
        ),
    ] = None,
    min_achieved_ratio: Annotated[
        float | None,
        typer.Option(help="Lowest achieved/offered load of a valid run, 0..1 (default 0.97)."),
    ] = None,
    min_ratio_samples: Annotated[
        int | None,
        typer.Option(
            help="Fewest samples a request class needs for a p99/p50 ratio (default 100)."
        ),
    ] = None,
) -> dict[str, Any]:
    return locals()


def _distribution(
    distributed: Annotated[
        bool, typer.Option(help="Split the load over `zqbench worker`s (Locust's runners).")
    ] = False,
    expect_workers: Annotated[
        int, typer.Option(help="--distributed: workers to wait for; each runs a share.")
    ] = 1,
    master_bind: Annotated[
        str,
        typer.Option(
            help="--distributed: HOST:PORT the workers connect to. Loopback by default; "
            "0.0.0.0:5557 accepts workers from other machines. Only workers that prove the "
            "shared secret join; the channel is not encrypted (--header values cross it).",
        ),
    ] = "127.0.0.1:5557",
    secret_env: opt.SecretEnvOpt = None,
    worker_wait_s: Annotated[
        float, typer.Option("--worker-wait", help="--distributed: seconds to wait for them.")
    ] = 60.0,
    max_lost_share: Annotated[
        float,
        typer.Option(help="--distributed: share of the run lost with dead workers, still valid."),
    ] = 0.0,
) -> dict[str, Any]:
    return locals()


def _output(
    out: Annotated[Path | None, typer.Option(help="Output folder.")] = None,
    html: Annotated[bool, typer.Option(help="Render report.html for every step.")] = True,
    inconclusive_ok: opt.InconclusiveOkOpt = False,
) -> dict[str, Any]:
    return {"out": out, "html": html, "inconclusive_fails": not inconclusive_ok}


# Each named as the RunOptions field it fills, so `RunOptions(**groups)` takes them.
PLAN = opt.Flags("plan", _plan)
ENDPOINT = opt.Flags("endpoint", _endpoint)
SERVER = opt.Flags("server", _server)
CONNECTION = opt.Flags("connection", _connection)
BESIDE = opt.Flags("beside", _beside)
VALIDITY = opt.Flags("validity", _validity)
DISTRIBUTION = opt.Flags("distribution", _distribution)
OUTPUT = opt.Flags("output", _output)
