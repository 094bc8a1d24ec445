"""`zqbench conform`: flags to ConformOptions, the table to the terminal, files, exit code.

Imported by zqbench.cli at startup, so it imports nothing heavy at module level (the
dialect registry is standard library only). Option values are checked by the library
(`zqbench.conform.options`); the CLI boundary (`zqbench.cli.boundary`) shows its errors
under the flags' names.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from zqbench.cli.options import (
    ApiKeyEnvOpt,
    ServerSchedulerOpt,
    TargetOpt,
    TimeoutOpt,
    fields_of,
    note,
    refuse_embedded_options_with_target,
)
from zqbench.dialects import DIALECTS
from zqbench.option_values import ServerScheduler
from zqbench.printable import one_line

if TYPE_CHECKING:
    from zqbench.conform import CheckOutcome, ConformOptions, ConformReport


# The APIs to check; the first drives errors.*, http.* and zeroqueue.*. auto: every API
# that answers a small request, in the registry's order; then one member per registered
# dialect; all: every one. mypy reads only enums whose members are written out: it is shown
# the class without the dialects' members, which no code may name.
if TYPE_CHECKING:

    class ConformApi(str, Enum):
        auto = "auto"
        all = "all"

else:
    ConformApi = Enum(
        "ConformApi",
        [("auto", "auto"), *((name, name) for name in DIALECTS), ("all", "all")],
        module=__name__,
        type=str,
    )


# Parameters are named after ConformOptions fields (`apis` is --api, `timeout_s` --timeout),
# so the CLI boundary shows an OptionError about a field under its flag.
ApisOpt = Annotated[
    ConformApi,
    typer.Option(
        "--api",
        help=f"{', '.join(DIALECTS)}, all, or auto: those that answer (the first drives "
        f"errors/zeroqueue; {next(iter(DIALECTS))} first).",
    ),
]
Only = Annotated[list[str] | None, typer.Option("--only", help="Run only this group (repeatable).")]
Skip = Annotated[list[str] | None, typer.Option("--skip", help="Skip this check id (repeatable).")]
JsonPath = Annotated[Path | None, typer.Option("--json", help="Write the JSON report here.")]
ListChecks = Annotated[bool, typer.Option("--list", help="Print the catalogue and exit.")]
Model = Annotated[
    str | None,
    typer.Option(help="Model name (default: the one GET /v1/models lists; the first of several)."),
]
StrictModel = Annotated[
    bool,
    typer.Option("--strict-model", help="Without --model: fail when GET /v1/models lists several."),
]
ExpectAuth = Annotated[bool, typer.Option(help="errors.6: requests without the key must get 401.")]
ExpectHttp2 = Annotated[
    bool, typer.Option(help="http.2 fails (not skips) when HTTP/2 does not work.")
]
ExpectHeaders = Annotated[
    list[str] | None,
    typer.Option("--expect-header", help="'NAME=VALUE' or 'NAME~REGEX' every response must carry."),
]
QueueMargin = Annotated[
    float,
    typer.Option(
        help="zeroqueue.5: least margin (ms) over 2x the TTFT at rest that counts as a wait."
    ),
]
SlopeSteps = Annotated[
    str, typer.Option(help="zeroqueue.5: concurrencies, comma-separated (2x capacity is added).")
]
OverloadConcurrency = Annotated[
    int, typer.Option(help="zeroqueue.6-10: requests in the overload burst.")
]
FalseRefusalShare = Annotated[
    float, typer.Option(help="zeroqueue.11: most share of refusals under load with a slot free.")
]
RetryShare = Annotated[
    float, typer.Option(help="zeroqueue.12: least share of retries admitted when Retry-After said.")
]
DisconnectTokens = Annotated[
    int, typer.Option(help="zeroqueue.13: max_tokens of the streams it cuts mid-generation.")
]
DisconnectBound = Annotated[
    float, typer.Option(help="zeroqueue.13: seconds within which cut streams free their slots.")
]
BodyLimit = Annotated[int, typer.Option(help="errors.4: the endpoint's body limit.")]
RequireInstrumentation = Annotated[
    bool,
    typer.Option(
        help="zeroqueue.1-4 fail, not skip, on a target without the reference server's timing "
        "headers and /health jitter (its instrumentation)."
    ),
]
ServerBatch = Annotated[int, typer.Option(help="Embedded reference server: sequence slots.")]


def conform(
    ctx: typer.Context,
    target: TargetOpt = None,
    apis: ApisOpt = ConformApi.auto,
    only: Only = None,
    skip: Skip = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    json_path: JsonPath = None,
    out: Annotated[Path | None, typer.Option(help="Folder for conform.json and junit.xml.")] = None,
    list_checks: ListChecks = False,
    model: Model = None,
    strict_model: StrictModel = False,
    api_key_env: ApiKeyEnvOpt = None,
    expect_auth: ExpectAuth = False,
    expect_http2: ExpectHttp2 = False,
    expect_headers: ExpectHeaders = None,
    require_instrumentation: RequireInstrumentation = False,
    timeout_s: TimeoutOpt = 10.0,
    server_queue_bound_ms: Annotated[float, typer.Option(help="zeroqueue.3 bound.")] = 5.0,
    queue_margin_ms: QueueMargin = 20.0,
    slope_steps: SlopeSteps = "1,2,4,8,16,32",
    overload_concurrency: OverloadConcurrency = 32,
    refusal_bound_ms: Annotated[float, typer.Option(help="zeroqueue.8 bound.")] = 100.0,
    recovery_s: Annotated[float, typer.Option(help="zeroqueue.10 bound, seconds.")] = 2.0,
    false_refusal_share: FalseRefusalShare = 0.05,
    retry_share: RetryShare = 0.75,
    disconnect_max_tokens: DisconnectTokens = 1024,
    disconnect_bound_s: DisconnectBound = 1.0,
    body_limit_bytes: BodyLimit = 32 * 1024 * 1024,
    server_scheduler: ServerSchedulerOpt = ServerScheduler.zero_queue,
    server_max_batch_size: ServerBatch = 4,
) -> None:
    """Run the numbered conformance checks against an endpoint (exit 1 when any fails)."""
    from zqbench.conform.catalogue import format_catalogue
    from zqbench.conform.options import ConformOptions, parse_steps
    from zqbench.option_values import read_api_key
    from zqbench.outputs.conform import format_summary
    from zqbench.outputs.registry import write_conform

    refuse_embedded_options_with_target(ctx)

    if list_checks:
        typer.echo(format_catalogue())
        return
    given = {
        "target": target or "",  # "": the embedded server's, once it has started
        "apis": _apis(apis),
        "api_key": read_api_key(api_key_env),
        "slope_steps": parse_steps(slope_steps),
    }
    options = ConformOptions(**(fields_of(ConformOptions, ctx.params) | given))
    report = _run(options, server_scheduler.value, server_max_batch_size)
    typer.echo(format_summary(report))
    write_conform(report, out=out, json_path=json_path, junit=junit)
    raise typer.Exit(report.exit_code)


def _apis(choice: ConformApi) -> tuple[str, ...]:
    """The APIs to check; (): those the target answers (zqbench.target.resolve detects them)."""
    if choice is ConformApi.auto:
        return ()
    return tuple(DIALECTS) if choice is ConformApi.all else (choice.value,)


def _run(options: ConformOptions, scheduler: str, max_batch_size: int) -> ConformReport:
    """The run against `options.target`, or against an embedded reference server."""
    from zqbench.conform import run_conformance
    from zqbench.outputs.conform import format_line
    from zqbench.target.embedded import EmbeddedServer

    def show(outcome: CheckOutcome) -> None:
        typer.echo(one_line(format_line(outcome)))

    if options.target:
        return run_conformance(options, on_result=show, on_note=note)
    typer.echo(f"starting the reference server ({scheduler}, sim engine)", err=True)
    with EmbeddedServer(engine="sim", scheduler=scheduler, max_batch_size=max_batch_size) as srv:
        local = dataclasses.replace(options, target=srv.base_url)
        return run_conformance(local, on_result=show, on_note=note)
