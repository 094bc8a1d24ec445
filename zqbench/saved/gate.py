"""The CI gate after the fact: re-evaluate SLOs on a saved run, no traffic sent.

    summary = gate_run(Path(run_dir), slos=["latency:p99<150ms"])
    exit_code_for_verdict(summary.verdict)

The run's samples and its RunInfo (rebuilt from summary.json) go through the same
`summarize` as `zqbench run`, so a gate on a saved run decides exactly as the run would
have with those SLOs. With no SLOs given, the run's own SLOs are re-evaluated.
Nothing is written unless the caller asks (`write_gated`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from zqbench.distributed.outcome import DistributedOutcome
from zqbench.metrics.frame import Samples
from zqbench.metrics.slo import parse_slos
from zqbench.metrics.summarize import summarize
from zqbench.outputs.json_out import write_summary
from zqbench.outputs.paths import SUMMARY_JSON
from zqbench.saved.report import rerender_run
from zqbench.saved.run import load_run, run_info
from zqbench.summary import Summary


def gate_run(run_dir: Path, slos: Sequence[str] = ()) -> Summary:
    """The summary of a saved run evaluated against `slos` (default: its own).

    Raises UsageError for a folder that is not a run or a bad SLO expression (exit 2)."""
    parse_slos(list(slos))  # a bad expression fails before the samples are read
    run = load_run(Path(run_dir))
    own = [slo.expr for slo in run.summary.slos]
    summary = summarize(run.columns(), run=run_info(run.summary), slos=list(slos) or own)
    return _carried_over(run.summary, summary, run.columns())


def _carried_over(saved: Summary, summary: Summary, samples: Samples) -> Summary:
    """The sections a run adds after `summarize`: a distributed run's workers (their lag
    and the lost share judged again, so a lost worker still fails the gate) and the
    profile capture."""
    if saved.distributed is not None:
        lags = pd.DataFrame({k: samples[k] for k in ("worker", "t_send", "t_intended")})
        summary = DistributedOutcome.of_record(saved.distributed).attach(summary, lags)
    if saved.profile is not None:
        summary = summary.model_copy(update={"profile": saved.profile})
    return summary


def write_gated(run_dir: Path, summary: Summary, *, inconclusive_fails: bool) -> list[Path]:
    """Replace the run's summary.json with the gated one and re-render every output."""
    path = write_summary(summary, Path(run_dir) / SUMMARY_JSON)
    return [path, *rerender_run(Path(run_dir), inconclusive_fails=inconclusive_fails)]
