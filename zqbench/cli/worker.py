"""`zqbench worker --master HOST`: serve shares of distributed runs on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


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


def register(app: typer.Typer) -> None:
    app.command()(worker)
