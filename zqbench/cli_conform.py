"""`zqbench conform`: flags to ConformOptions, the table to the terminal, files, exit code.

Imported by zqbench.cli at startup, so it imports nothing heavy at module level.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from zqbench.errors import ZqbenchError

_APIS = {"anthropic": ("anthropic",), "openai": ("openai",), "all": ("anthropic", "openai")}


def conform(
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the endpoint. Default: start the bundled reference server."),
    ] = None,
    api: Annotated[
        str, typer.Option(help="anthropic, openai, or all (the first drives errors/zeroqueue).")
    ] = "anthropic",
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only this group (repeatable).")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Skip this check id (repeatable).")
    ] = None,
    junit: Annotated[Path | None, typer.Option(help="Write JUnit XML here.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the JSON report here.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for conform.json and junit.xml.")] = None,
    list_checks: Annotated[
        bool, typer.Option("--list", help="Print the catalogue and exit.")
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="Model name (default: the first of GET /v1/models).")
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the API key.")
    ] = None,
    expect_auth: Annotated[
        bool, typer.Option(help="errors.6: requests without the key must get 401.")
    ] = False,
    expect_http2: Annotated[
        bool, typer.Option(help="http.2 fails (not skips) when HTTP/2 does not work.")
    ] = False,
    expect_header: Annotated[
        list[str] | None,
        typer.Option(help="'NAME=VALUE' or 'NAME~REGEX' every response must carry."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Per-request timeout, seconds.")] = 10.0,
    server_queue_bound_ms: Annotated[float, typer.Option(help="zeroqueue.3 bound.")] = 5.0,
    slope_tolerance_ms: Annotated[
        float, typer.Option(help="zeroqueue.5: ms of TTFT per added concurrent request.")
    ] = 3.0,
    slope_steps: Annotated[
        str, typer.Option(help="zeroqueue.5: concurrencies, comma-separated.")
    ] = "1,2,4,8,16",
    overload_concurrency: Annotated[
        int, typer.Option(help="zeroqueue.6-10: requests in the overload burst.")
    ] = 32,
    refusal_bound_ms: Annotated[float, typer.Option(help="zeroqueue.8 bound.")] = 100.0,
    recovery_s: Annotated[float, typer.Option(help="zeroqueue.10 bound, seconds.")] = 2.0,
    body_limit_bytes: Annotated[int, typer.Option(help="errors.4: the endpoint's body limit.")] = 32
    * 1024
    * 1024,
    server_scheduler: Annotated[
        str, typer.Option(help="Embedded reference server: zero-queue or fifo.")
    ] = "zero-queue",
    server_max_batch_size: Annotated[
        int, typer.Option(help="Embedded reference server: sequence slots.")
    ] = 4,
) -> None:
    """Run the numbered conformance checks against an endpoint (exit 1 when any fails)."""
    from zqbench.conform.report import format_catalogue

    if list_checks:
        typer.echo(format_catalogue())
        return
    try:
        code = _run(
            target=target,
            apis=_APIS.get(api),
            api=api,
            only=tuple(only or ()),
            skip=tuple(skip or ()),
            junit=junit,
            json_path=json_path,
            out=out,
            model=model,
            api_key_env=api_key_env,
            expect_auth=expect_auth,
            expect_http2=expect_http2,
            expect_headers=tuple(expect_header or ()),
            timeout=timeout,
            server_queue_bound_ms=server_queue_bound_ms,
            slope_tolerance_ms=slope_tolerance_ms,
            slope_steps=slope_steps,
            overload_concurrency=overload_concurrency,
            refusal_bound_ms=refusal_bound_ms,
            recovery_s=recovery_s,
            body_limit_bytes=body_limit_bytes,
            server_scheduler=server_scheduler,
            server_max_batch_size=server_max_batch_size,
        )
    except ZqbenchError as exc:
        typer.echo(f"zqbench: error: {exc.message}", err=True)
        raise typer.Exit(exc.exit_code) from None
    raise typer.Exit(code)


def _run(**kw: object) -> int:
    from zqbench.conform import ConformOptions, run_conformance
    from zqbench.conform.report import format_line, format_table, write_json, write_junit
    from zqbench.embedded import EmbeddedServer
    from zqbench.errors import UsageError

    if kw["apis"] is None:
        raise UsageError(f"unknown --api {kw['api']!r}: choose anthropic, openai or all")
    key = None
    if kw["api_key_env"]:
        key = os.environ.get(str(kw["api_key_env"]))
        if not key:
            raise UsageError(f"--api-key-env {kw['api_key_env']}: the variable is not set")
    try:
        steps = tuple(int(s) for s in str(kw["slope_steps"]).split(","))
    except ValueError:
        raise UsageError(
            f"--slope-steps {kw['slope_steps']!r}: integers, comma-separated"
        ) from None

    def options(target: str) -> ConformOptions:
        return ConformOptions(
            target=target,
            apis=kw["apis"],  # type: ignore[arg-type]
            model=kw["model"],  # type: ignore[arg-type]
            api_key=key,
            expect_auth=bool(kw["expect_auth"]),
            expect_http2=bool(kw["expect_http2"]),
            expect_headers=kw["expect_headers"],  # type: ignore[arg-type]
            only=kw["only"],  # type: ignore[arg-type]
            skip=kw["skip"],  # type: ignore[arg-type]
            timeout_s=float(kw["timeout"]),  # type: ignore[arg-type]
            server_queue_bound_ms=float(kw["server_queue_bound_ms"]),  # type: ignore[arg-type]
            slope_tolerance_ms=float(kw["slope_tolerance_ms"]),  # type: ignore[arg-type]
            slope_steps=steps,
            overload_concurrency=int(kw["overload_concurrency"]),  # type: ignore[call-overload]
            refusal_bound_ms=float(kw["refusal_bound_ms"]),  # type: ignore[arg-type]
            recovery_s=float(kw["recovery_s"]),  # type: ignore[arg-type]
            body_limit_bytes=int(kw["body_limit_bytes"]),  # type: ignore[call-overload]
        )

    def show(outcome: object) -> None:
        typer.echo(format_line(outcome))

    if kw["target"]:
        report = run_conformance(options(str(kw["target"])), on_result=show)
    else:
        typer.echo(
            f"starting the reference server ({kw['server_scheduler']}, sim engine)", err=True
        )
        server = EmbeddedServer(
            engine="sim",
            scheduler=str(kw["server_scheduler"]),
            max_batch_size=int(kw["server_max_batch_size"]),  # type: ignore[call-overload]
        )
        with server:
            report = run_conformance(options(server.base_url), on_result=show)
    typer.echo(format_table(report).splitlines()[-1])
    out = kw["out"]
    if isinstance(out, Path):
        out.mkdir(parents=True, exist_ok=True)
        write_json(report, out / "conform.json")
        write_junit(report, out / "junit.xml")
    if isinstance(kw["json_path"], Path):
        write_json(report, kw["json_path"])
    if isinstance(kw["junit"], Path):
        write_junit(report, kw["junit"])
    return report.exit_code


def register(app: typer.Typer) -> None:
    app.command(name="conform")(conform)


__all__ = ["register"]
