"""`zqbench serve ...`: exec the bundled reference server with the flags as given."""

from __future__ import annotations

import os
import sys

import typer


def serve(ctx: typer.Context) -> None:
    """Start the bundled reference server (all flags go to `python -m reference_server`)."""
    # Exec, not a child: this process becomes the server, so every signal (SIGTERM,
    # Ctrl-C, even SIGKILL) reaches the server itself and nothing is left to outlive us.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "reference_server", *ctx.args])


def register(app: typer.Typer) -> None:
    app.command(
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(serve)
