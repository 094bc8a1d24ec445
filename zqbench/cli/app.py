"""The `zqbench` command line: parse flags into the library's options and call the library.

One module per command (`run.py`, `sweep.py`, `profile.py`, ...); the list below adds them,
each command's function, or its module's `register(app)` where it needs more than that.

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
for _command in (run.run, worker.worker, sweep.sweep, scenarios.scenarios, probe.probe):
    app.command()(_command)
serve.register(app)  # its arguments pass through to the server
for _command in (reports.report, reports.gate, reports.compare, conform.conform):
    app.command()(_command)
impair.register(app)  # a group of commands
profile.register(app)  # the server command after `--`


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
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _RedactingStream(out), _RedactingStream(err)
    try:
        sys.exit(_run_app())
    finally:
        sys.stdout, sys.stderr = out, err  # in-process callers (tests) get theirs back


def _run_app() -> int:
    """The app's exit code; every way out of it is one line on stderr at most."""
    try:
        # Not standalone: click's own usage errors (an unknown flag, a value of the wrong
        # type) come here and are shown in zqbench's one-line form, not as a boxed panel.
        code = app(standalone_mode=False, prog_name="zqbench")
    except typer.Abort:
        return 130
    except typer.TyperException as exc:  # click's: a usage error names its command
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        print(f"zqbench: error: {exc.format_message()}{hint}", file=sys.stderr)
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_USAGE
    except Exception as exc:  # a bug: one line for the user, the traceback on request
        if os.environ.get("ZQBENCH_DEBUG"):
            raise
        print(
            f"zqbench: internal error: {type(exc).__name__}: {exc} "
            "(set ZQBENCH_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    main()
