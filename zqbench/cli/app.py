"""The `zqbench` command line: parse flags into the library's options and call the library.

One module per command (`run.py`, `sweep.py`, `profile.py`, ...), each with a `register(app)`
that adds it; `COMMANDS` below is the one list.

Commands hold no logic and no error handling: the options are checked by the library, and
`zqbench.cli.boundary` turns any ZqbenchError into one line and its exit code. `main` is
the only caller of `sys.exit`.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, TextIO

import typer

from zqbench.cli import (
    conform,
    impair,
    probe,
    profile,
    reports,
    run,
    scenarios,
    serve,
    sweep,
    worker,
)
from zqbench.cli.boundary import CommandGroup
from zqbench.errors import EXIT_INTERNAL, EXIT_USAGE
from zqbench.redact import redact_known

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


# In `zqbench --help` order.
COMMANDS = (run, worker, sweep, scenarios, probe, serve, reports, conform, impair, profile)
for _command in COMMANDS:
    _command.register(app)


class _RedactingStream:
    """stdout or stderr with this process's known secrets replaced in everything written:
    a target that echoes the API key in an error body never gets it onto the terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_known(text))
        return len(text)  # what the caller wrote, as a stream reports it

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main() -> None:
    sys.stdout = _RedactingStream(sys.stdout)
    sys.stderr = _RedactingStream(sys.stderr)
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
