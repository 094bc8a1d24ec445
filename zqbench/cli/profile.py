"""`zqbench profile nsys|ncu|torch [SCENARIO] [options] [-- SERVER_COMMAND...]`.

The scenario is a positional, as in `run` and `sweep`. Everything after `--` is the
server command, verbatim: `ServerCommand` takes it off before click parses the rest, so
`zqbench profile nsys -- vllm serve M` can never read `vllm` as the scenario.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from zqbench.cli import groups as g
from zqbench.cli import options as opt


class ServerCommand(TyperCommand):
    """Everything after the first `--` is the server command, kept in `ctx.meta`."""

    # ctx: typer's own (vendored) click Context; typer exports no public name for it.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            args, ctx.meta[SERVER_COMMAND] = args[:cut], tuple(args[cut + 1 :])
        result: list[str] = super().parse_args(ctx, args)
        return result


SERVER_COMMAND = "zqbench.profile.server_command"


@opt.takes(
    g.ENDPOINT.only("target", "api", "model", "headers", "api_key_env"),
    g.PLAN.only("seed", "rate_scale", "duration_scale", "slos", "max_tokens"),
    g.OUTPUT.only("out", "inconclusive_ok"),
    g.SERVER,
)
def profile(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="The profiler: nsys, ncu or torch.")],
    scenario: opt.ScenarioArg = "burst",
    capture_stage: Annotated[
        str | None, typer.Option(help="Capture during this scenario stage (e.g. pulse).")
    ] = None,
    capture_window: Annotated[
        str | None, typer.Option(help="Capture from START to END seconds after t = 0.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the commands; start nothing.")
    ] = False,
    launch_skip: Annotated[int, typer.Option(help="ncu: kernel launches to skip.")] = 0,
    launch_count: Annotated[int, typer.Option(help="ncu: kernel launches to profile.")] = 20,
    ncu_set: Annotated[str, typer.Option(help="ncu: the section set (--set).")] = "full",
    slowest: Annotated[int, typer.Option(help="Slowest requests (TTFT) to list.")] = 10,
    *,
    quiet: opt.QuietOpt = False,
    **groups: Any,
) -> None:
    """Run a scenario with the server under nsys, ncu or torch.profiler, captured in a window
    (a stage or START:END seconds); without `--`, the bundled reference server (torch)."""
    from zqbench.cli.live_view import LiveView
    from zqbench.pipeline.run import RunOptions
    from zqbench.profile.command import ProfileJob
    from zqbench.profile.command import profile as run_profile
    from zqbench.profile.tools import NcuLimits
    from zqbench.profile.window import WindowSpec

    options = RunOptions(**groups)
    job = ProfileJob(
        tool=tool,
        window=WindowSpec.parse(capture_stage, capture_window),
        server_command=ctx.meta.get(SERVER_COMMAND, ()),
        dry_run=dry_run,
        ncu=NcuLimits(launch_skip, launch_count, ncu_set),
        slowest=slowest,
    )
    if dry_run:
        run_profile(options, job, echo=typer.echo)
        return
    view = LiveView(enabled=not quiet)
    with view:
        result = run_profile(options, job, on_progress=view.update, on_target=view.note)
    assert result is not None
    view.final(result.summary, result.out_dir)
    prof = result.summary.profile
    if prof is not None:
        files = ", ".join(prof.artifacts) or "none"
        typer.echo(f"profile: {prof.request_ranges} request ranges; files: {files}")
        for note in prof.notes:
            typer.echo(f"profile: {note}")
    raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command(
        cls=ServerCommand,
        epilog="After `--`: the server command, run under the profiler (needs --target).",
    )(profile)
