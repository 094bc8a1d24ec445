"""The CLI's one error boundary: a `ZqbenchError` becomes one stderr line and its exit code.

Every command group of `zqbench` is a `CommandGroup`, so every command has it, for errors
raised while its flags are parsed (a choice the library rejects) as well as while it runs.
An `OptionError` names an options field in the library's words (`workers 0: must be at
least 1`); here it is shown with the command's flag for that field (`--workers 0: ...`).
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from zqbench.errors import OptionError, ZqbenchError
from zqbench.printable import one_line


class CommandGroup(TyperGroup):
    """A typer command group whose commands report ZqbenchError as `zqbench: error: ...`."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ZqbenchError as exc:
            command = self.get_command(ctx, ctx.invoked_subcommand or "")
            fail(exc, getattr(command, "params", ()))


def fail(exc: ZqbenchError, params: Any = ()) -> NoReturn:
    """Print the error's one line (an option named by its flag among `params`) and exit."""
    message = exc.message
    if isinstance(exc, OptionError):
        message = exc.render(flag_for(exc.option, params))
    typer.echo(f"zqbench: error: {one_line(message)}", err=True)
    raise typer.Exit(exc.exit_code) from None


def flag_for(option: str, params: Any) -> str:
    """The flag of the parameter named `option`, its longest spelling (--header, not -H);
    `--option-name` when no parameter has that name."""
    for param in params:
        if param.name == option and param.opts:
            return str(max(param.opts, key=len))
    return "--" + option.replace("_", "-")
