"""`zqbench run SCENARIO`: flags to RunOptions, the live view, the run's exit code."""

from __future__ import annotations

from typing import Any

import typer

from zqbench.cli import groups as g
from zqbench.cli import options as opt


@opt.takes(
    g.ENDPOINT,
    g.CONNECTION,
    g.PLAN,
    g.OUTPUT.only("out", "inconclusive_ok"),
    g.SERVER,
    g.BESIDE,
    g.VALIDITY,
    g.DISTRIBUTION,
)
def run(scenario: opt.ScenarioArg = "burst", *, quiet: opt.QuietOpt = False, **groups: Any) -> None:
    """Drive a scenario against a target, measure, gate on SLOs and write the outputs."""
    from zqbench.cli.live_view import LiveView
    from zqbench.pipeline.run import RunOptions, run_scenario

    options = RunOptions(**groups)
    view = LiveView(enabled=not quiet)
    with view:
        result = run_scenario(options, on_progress=view.update, on_target=view.note)
    view.final(result.summary, result.out_dir)
    raise typer.Exit(result.exit_code)
