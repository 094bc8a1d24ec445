"""`zqbench impair ...`: inspect and remove network impairment rules left behind.

A run removes its own nftables rules on every exit it can see (normal end, error, Ctrl-C,
SIGTERM); a run killed with SIGKILL cannot, and `zqbench impair clear` removes those.
`zqbench.cli` calls `register(app)`; nothing heavy is imported at module level.
"""

from __future__ import annotations

from typing import Annotated

import typer

from zqbench.cli.boundary import CommandGroup

impair_app = typer.Typer(
    name="impair",
    cls=CommandGroup,
    help="Network impairment rules (nftables table `inet zqbench`).",
    no_args_is_help=True,
)

RunName = Annotated[
    str | None,
    typer.Option("--run", help="Only this run's rules (its output folder name). Default: all."),
]


@impair_app.command("clear")
def clear(run: RunName = None) -> None:
    """Remove zqbench's packet-loss rules (all of them, or one run's)."""
    from zqbench.impair import nft

    nft.preflight()
    removed = nft.remove(run)
    runs = sorted({r.comment.removeprefix(nft.COMMENT_PREFIX) for r in removed})
    if not removed:
        typer.echo("no zqbench impairment rules found")
        return
    typer.echo(f"removed {len(removed)} rule(s) of {len(runs)} run(s): {', '.join(runs)}")


@impair_app.command("list")
def list_rules(run: RunName = None) -> None:
    """Show zqbench's packet-loss rules now in place, with the packets each has dropped."""
    from zqbench.impair import nft

    nft.preflight()
    rules = nft.list_rules(run)
    if not rules:
        typer.echo("no zqbench impairment rules in place")
        return
    for r in rules:
        typer.echo(f"{r.chain:<7} handle {r.handle:<5} dropped {r.dropped_packets:<8} {r.comment}")


def register(app: typer.Typer) -> None:
    app.add_typer(impair_app, name="impair")
