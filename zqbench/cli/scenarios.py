"""`zqbench scenarios [NAME]`: the bundled scenarios, or one scenario's file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def scenarios(
    name: Annotated[str | None, typer.Argument(help="Show this scenario's file.")] = None,
) -> None:
    """List the bundled scenarios, or show one."""
    from zqbench.scenario import list_bundled, load_scenario

    if name is None:
        for scenario_name, description in list_bundled():
            typer.echo(f"{scenario_name:<16} {description}")
        return
    scenario = load_scenario(name)
    typer.echo(Path(scenario.source).read_text(encoding="utf-8"), nl=False)
