"""`zqbench report`, `zqbench gate` and `zqbench compare`: commands over saved runs.

No traffic is sent. `zqbench.cli`'s error boundary reports ZqbenchError. Nothing heavy is
imported at module level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from zqbench.cli.options import InconclusiveOkOpt, RunDirArg
from zqbench.errors import OptionError
from zqbench.printable import one_line


def _percent(text: str, option: str) -> float:
    """'5%' -> 0.05; '0.05' -> 0.05."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        problem = "expected a percentage like 5% or a fraction"
        raise OptionError(option, problem, value=repr(text)) from None


def report(run_dir: RunDirArg, inconclusive_ok: InconclusiveOkOpt = False) -> None:
    """Re-render summary.md, junit.xml, plots and report.html of a saved run (no traffic).

    A run killed before its summary.json is recovered from its samples and marked
    interrupted."""
    from zqbench.saved.report import report_run

    paths = report_run(run_dir, inconclusive_fails=not inconclusive_ok)
    for path in paths:
        typer.echo(str(path))


def gate(
    run_dir: RunDirArg,
    slos: Annotated[
        list[str] | None,
        typer.Option(
            "--slo", help="SLO to evaluate, e.g. 'latency:p99<150ms' (default: the run's own)."
        ),
    ] = None,
    write: Annotated[
        bool, typer.Option(help="Rewrite the run's summary.json and outputs with this gate.")
    ] = False,
    inconclusive_ok: InconclusiveOkOpt = False,
) -> None:
    """Re-evaluate SLOs on a saved run and exit 0 pass, 1 fail/inconclusive, 4 invalid."""
    from zqbench.errors import exit_code_for_verdict
    from zqbench.saved.gate import gate_run, write_gated

    summary = gate_run(run_dir, slos or ())
    if write:
        write_gated(run_dir, summary, inconclusive_fails=not inconclusive_ok)
    # One line each, escaped: a saved summary.json may quote a target, or be anyone's.
    typer.echo(one_line(f"verdict: {summary.verdict.upper()}   {run_dir}"))
    for result in summary.slos:
        typer.echo(one_line(f"  {result.verdict:<12} {result.expr}  {result.message}"))
    for reason in summary.validity.reasons:
        typer.echo(one_line(f"  invalid: {reason}"))
    code = exit_code_for_verdict(summary.verdict, inconclusive_fails=not inconclusive_ok)
    raise typer.Exit(code)


def compare(
    runs: Annotated[list[Path], typer.Argument(help="BASELINE CANDIDATE [CANDIDATE ...]")],
    out: Annotated[
        Path | None, typer.Option(help="Folder for compare.html/.md/.json (default: none).")
    ] = None,
    max_regression: Annotated[
        str, typer.Option(help="Tolerated increase of each gated percentile, e.g. 5%.")
    ] = "5%",
    max_error_increase: Annotated[
        str, typer.Option(help="Tolerated increase of the error rate, in points, e.g. 1%.")
    ] = "1%",
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="Gated statistic, e.g. latency:p99 or errors:rate"
            " (repeatable; default: latency and ttft p50/p99, errors:rate).",
        ),
    ] = None,
    inconclusive_ok: InconclusiveOkOpt = False,
) -> None:
    """Compare runs with the first: differences with 95% CIs and a regression verdict.

    Exit 0 no regression, 1 regression (or inconclusive), 2 bad usage, 4 an invalid run."""
    from zqbench.outputs.compare_render import render_compare_md
    from zqbench.outputs.registry import write_comparison
    from zqbench.saved.compare import compare_runs, exit_code

    comparison = compare_runs(
        runs,
        max_regression=_percent(max_regression, "max_regression"),
        max_error_increase=_percent(max_error_increase, "max_error_increase"),
        metrics=metrics or (),
    )
    paths = write_comparison(comparison, out) if out is not None else []
    typer.echo(render_compare_md(comparison), nl=False)
    for path in paths:
        typer.echo(str(path))
    raise typer.Exit(exit_code(comparison, inconclusive_fails=not inconclusive_ok))
