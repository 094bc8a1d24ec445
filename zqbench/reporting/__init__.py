"""Reports of saved runs: renderers of summary.json + samples.parquet, never new statistics.

    saved.py    load_run(dir) -> SavedRun; run_info(summary) -> RunInfo   (the only reader)
    series.py   time bins: rates, status shares, per-bin percentile bands  (numpy)
    plots.py    the figures as PNG (the only module importing matplotlib, lazily, Agg)
    render.py   render_all(dir): summary.md, junit.xml, plots/, report.html
    gate.py     gate_run(dir, slos): re-evaluate SLOs on a saved run
    compare.py  compare_runs(dirs): differences with CIs, regression verdict, HTML + Markdown

Statistics come from `zqbench.metrics` (summarize, quantiles, SLO evaluation); the
HTML, Markdown and JUnit writers from `zqbench.outputs`. Data flows one way: saved run ->
metrics -> renderers. Import the submodules directly; this package imports nothing heavy.
"""

from __future__ import annotations

from pathlib import Path


def render_all(out_dir: Path, *, inconclusive_fails: bool = True) -> list[Path]:
    """Every rendered output of a saved run (see render.render_all)."""
    from zqbench.reporting.render import render_all as _render_all

    return _render_all(out_dir, inconclusive_fails=inconclusive_fails)
