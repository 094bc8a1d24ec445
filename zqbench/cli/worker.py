"""`zqbench worker --master HOST`: serve shares of distributed runs on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zqbench.cli.options import SecretEnvOpt, note


def worker(
    master: Annotated[str, typer.Option(help="The master's HOST[:PORT] (port 5557 if none).")],
    out: Annotated[
        Path, typer.Option(help="Each run's own sample file goes under OUT/<run>/.")
    ] = Path("reports/workers"),
    once: Annotated[bool, typer.Option(help="Serve one run, then exit.")] = False,
    secret_env: SecretEnvOpt = None,
    connect_timeout_s: Annotated[
        float,
        typer.Option(
            "--connect-timeout",
            metavar="SECONDS",
            help="How long to wait for a master to listen, before exit 3; 0 waits as long as "
            "it takes.",
        ),
    ] = 60.0,
) -> None:
    """Run shares of `zqbench run --distributed` runs on this machine (a Locust worker)."""
    from zqbench.distributed.auth import read_secret
    from zqbench.distributed.worker import WorkerOptions, serve

    options = WorkerOptions(
        master=master,
        secret=read_secret(secret_env),
        out=out,
        once=once,
        connect_timeout_s=connect_timeout_s,
    )
    raise typer.Exit(serve(options, on_note=note))
