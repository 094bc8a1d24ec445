"""`zqbench probe --target URL`: sequential requests with a curl-style breakdown."""

from __future__ import annotations

from typing import Annotated

import typer

from zqbench.cli import options as opt
from zqbench.option_values import ApiChoice


def probe(
    ctx: typer.Context,
    target: Annotated[str, typer.Option(help="Base URL of the endpoint.")],
    n: Annotated[int, typer.Option("-n", help="Sequential requests.")] = 100,
    api: Annotated[
        ApiChoice,
        opt.choice_option(
            ApiChoice, "api", "The API the target speaks; auto: one small request per API."
        ),
    ] = ApiChoice.auto,
    model: opt.ModelOpt = None,
    strict_model: opt.StrictModelOpt = False,
    max_tokens: Annotated[int, typer.Option(help="max_tokens per request.")] = 16,
    prompt_tokens: Annotated[int, typer.Option(help="Prompt size in tokens.")] = 32,
    api_key_env: opt.ApiKeyEnvOpt = None,
    headers: opt.HeadersOpt = None,
    http2: opt.Http2Opt = False,
    fresh_connections: Annotated[
        bool, typer.Option("--fresh/--no-fresh", help="A new connection for every request.")
    ] = False,
    stream: Annotated[
        bool, typer.Option(help="Streaming requests; with --no-stream TTFT is the body's arrival.")
    ] = True,
    timeout_s: opt.TimeoutOpt = 30.0,
) -> None:
    """Sequential requests with a curl-style breakdown and P50/P99: does this endpoint queue?"""
    from zqbench.target.probe import ProbeOptions, format_probe, run_probe

    report = run_probe(ProbeOptions(**opt.fields_of(ProbeOptions, ctx.params)), on_note=opt.note)
    typer.echo(format_probe(report))
    raise typer.Exit(0 if report.ok else 1)
