"""The options zqbench's commands share, declared once as `Annotated` types.

A command names each parameter after the field of the options dataclass it fills
(`headers` for `--header`, `timeout_s` for `--timeout`), so `fields_of` maps the parsed
parameters onto it, and an `OptionError` about a field is shown with that parameter's flag.
Choices are the library's enums: `--help` lists their values and the library parses them.
Imported by the CLI at startup, so it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from zqbench import option_values as values


def _duration_s(text: str, option: str) -> float:
    from zqbench.errors import OptionError, ScenarioError
    from zqbench.scenario import parse_duration

    try:
        return parse_duration(text)
    except ScenarioError:
        raise OptionError(
            option, 'is not a duration: use a number with a unit, e.g. "20ms"', value=text
        ) from None


def choice_option(kind: type[values.Choice], option: str, help: str) -> Any:
    """A typer option taking one of `kind`'s values, listed in --help; a bad value is the
    library's OptionError about `option` (the parameter's name)."""
    return typer.Option(
        parser=lambda value: kind.parse(value, option),
        metavar="[" + "|".join(kind.values()) + "]",
        help=help,
    )


def fields_of(kind: type[Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters named like a field of the dataclass `kind`, as its keyword arguments.

    An unset parameter (None) is left out, so the field keeps its default; a repeatable
    one becomes a tuple."""
    names = {f.name for f in dataclasses.fields(kind)}
    return {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in params.items()
        if name in names and value is not None
    }


EMBEDDED_ONLY = ("server_scheduler", "server_engine", "server_args", "server_max_batch_size")


def refuse_embedded_options_with_target(ctx: typer.Context) -> None:
    """A --server-* flag sets up the bundled reference server, which --target replaces:
    given together, the flag would be silently ignored (a FIFO run that measured the
    remote zero-queue server). Exit 2 instead, naming both."""
    from zqbench.errors import UsageError

    if ctx.params.get("target") is None:
        return
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        # By name: typer's context may carry its own copy of click's ParameterSource.
        given = source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
        if param.name in EMBEDDED_ONLY and given:
            flag = max(param.opts, key=len)
            raise UsageError(
                f"{flag} sets up the bundled reference server, which --target replaces; "
                f"drop {flag} or --target"
            )


ScenarioArg = Annotated[str, typer.Argument(help="Bundled scenario name or a TOML path.")]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        parser=lambda text: values.check_target(text),
        help="Base URL of the endpoint. Default: start the bundled reference server.",
    ),
]
ApiOpt = Annotated[
    values.ApiChoice | None,
    choice_option(
        values.ApiChoice,
        "api",
        "The API the target speaks. Default with --target: auto (one small request per API "
        "finds it, the scenario's preferred when both answer); without: the scenario's.",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="Model name sent in each request. Default: the one GET /v1/models lists "
        "(the first of several, with a note)."
    ),
]
StrictModelOpt = Annotated[
    bool,
    typer.Option(
        "--strict-model",
        help="Without --model: fail when GET /v1/models lists several models.",
    ),
]
HeadersOpt = Annotated[
    list[str] | None, typer.Option("--header", "-H", help="Extra header 'Name: value'.")
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(help="Environment variable holding the API key (never pass keys in argv)."),
]
Http2Opt = Annotated[bool, typer.Option("--http2", help="HTTP/2 (h2c or ALPN).")]
H1ClientOpt = Annotated[
    values.H1Client,
    choice_option(
        values.H1Client, "h1_client", "HTTP/1.1 transport: raw (fastest measured) or aiohttp."
    ),
]
SeedOpt = Annotated[int, typer.Option(help="Seed of the arrival and mix RNG.")]
SlosOpt = Annotated[
    list[str] | None, typer.Option("--slo", help="Extra SLO, e.g. 'latency:p99<150ms'.")
]
OutOpt = Annotated[Path | None, typer.Option(help="Output folder.")]
MaxContextOpt = Annotated[
    int | None,
    typer.Option(
        help="Clamp request classes whose prompt + max_tokens exceed this many tokens "
        "(default: the target's /health max_context, when it says)."
    ),
]
CalibrationOpt = Annotated[
    values.CalibrationMode,
    choice_option(
        values.CalibrationMode,
        "calibration",
        "Prompt sizing: auto (calibrate once per target, cached), fresh, or off.",
    ),
]
ServerEngineOpt = Annotated[
    values.ServerEngine,
    choice_option(
        values.ServerEngine, "server_engine", "Embedded reference server: compute engine."
    ),
]
ServerSchedulerOpt = Annotated[
    values.ServerScheduler,
    choice_option(
        values.ServerScheduler, "server_scheduler", "Embedded reference server: admission."
    ),
]
InconclusiveOkOpt = Annotated[
    bool, typer.Option(help="Exit 0 when the verdict is inconclusive rather than 1.")
]
RateScaleOpt = Annotated[float, typer.Option(help="Multiply every rate or VU count.")]
DurationScaleOpt = Annotated[float, typer.Option(help="Multiply every duration.")]
MaxTokensOpt = Annotated[int | None, typer.Option(help="Override max_tokens.")]
DatasetOpt = Annotated[str | None, typer.Option(help="Send a dataset file's rows as the requests.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No live view (CI logs).")]
ServerArgsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--server-arg",
        help="Flag for the embedded server, e.g. --server-arg=--max-context=32768.",
    ),
]
RunDirArg = Annotated[Path, typer.Argument(help="A run folder (holds summary.json).")]
# Validity limits: None keeps the scenario's [validity], else zqbench's default.
MinSamplesOpt = Annotated[
    int | None, typer.Option(help="Fewest requests a valid run sends (default 100).")
]
MaxScheduleLagOpt = Annotated[
    float | None,
    typer.Option(
        "--max-schedule-lag",
        parser=lambda text: _duration_s(text, "max_schedule_lag_s"),
        metavar="DURATION",
        help="Highest schedule_lag p99 of a valid run, e.g. 20ms (default 10ms).",
    ),
]
RequestTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", help="Per-request timeout in seconds (overrides scenario)."),
]
GracefulStopOpt = Annotated[
    float | None,
    typer.Option(
        "--graceful-stop",
        parser=lambda text: _duration_s(text, "graceful_stop_s"),
        metavar="DURATION",
        help="How long requests in flight may finish after the schedule ends, e.g. 5s "
        "(overrides the scenario's; default 30s).",
    ),
]
MinAchievedRatioOpt = Annotated[
    float | None,
    typer.Option(help="Lowest achieved/offered load of a valid run, 0..1 (default 0.97)."),
]
MasterBindOpt = Annotated[
    str,
    typer.Option(
        help="--distributed: HOST:PORT the workers connect to. Loopback by default; "
        "0.0.0.0:5557 accepts workers from other machines. Only workers that prove the "
        "shared secret join; the channel is not encrypted (--header values cross it).",
    ),
]
SecretEnvOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="Environment variable holding the secret the master and its workers share and "
        "prove (never sent); default ZQBENCH_SECRET, at least 16 characters.",
    ),
]
MinRatioSamplesOpt = Annotated[
    int | None,
    typer.Option(help="Fewest samples a request class needs for a p99/p50 ratio (default 100)."),
]
MetricsPortOpt = Annotated[
    int | None,
    typer.Option(
        help="Serve the run so far as Prometheus metrics on this port (0: any free one) "
        "until the outputs are written; overrides the scenario's [metrics] port.",
    ),
]
MetricsHostOpt = Annotated[
    str | None,
    typer.Option(
        help="--metrics-port: the address to listen on; default 127.0.0.1. Another address "
        "shows the scenario, the target and the counts to that network, unauthenticated.",
    ),
]
ServerMetricsOpt = Annotated[
    bool,
    typer.Option(
        "--server-metrics/--no-server-metrics",
        help="Scrape the target's /metrics during the run when it serves a known engine's "
        "(vLLM, SGLang, TGI, the reference server): the server's own queue.",
    ),
]
