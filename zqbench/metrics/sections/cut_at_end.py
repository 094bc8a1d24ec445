"""Requests the run's end cut, and why: summary.json's `cut_at_end`.

A request still unanswered when the run ends is cut by zqbench (`transport:interrupted`,
outcome `interrupted`): after the graceful stop (`[load] graceful_stop`, 30 s by default)
when the load ran to its end, after 1 s when a [stop] rule ended it, at once on Ctrl-C.
It has no latency, and `errors:rate` counts it, as a client that gave up then would. On a
server that queues, most such requests never started (no first token): they were still
waiting for a slot. The record says how many, how long they had waited, and what ended the
run, so that a count of "failures" is never read as the server's errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from zqbench import summary as model
from zqbench.metrics.classify import INTERRUPTED
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.sections.base import sentence

if TYPE_CHECKING:
    from zqbench.metrics.summarize import RunInfo

STOP_RULE_GRACE_S = 1.0  # zqbench.engines.native: a stopped load's in-flight requests


def cut_at_end(frame: MetricFrame, run: RunInfo) -> model.CutAtEnd | None:
    """None when nothing was cut, or the run judged no outcomes (saved before it did)."""
    if frame.outcomes is None:
        return None
    cut = (frame.outcomes.outcome == INTERRUPTED) & ~frame.columns.unsent
    if not cut.any():
        return None
    c = frame.columns
    age = (c.t_end[cut] - c.t_send[cut]) / NS_PER_S
    waiting = int(np.count_nonzero(np.isnan(c.t_first_token[cut])))
    how, grace = _how(run)
    return model.CutAtEnd(
        how=how,
        grace=grace,
        requests=int(cut.sum()),
        waiting=waiting,
        streaming=int(cut.sum()) - waiting,
        age_min=float(age.min()),
        age_max=float(age.max()),
    )


def _how(run: RunInfo) -> tuple[Any, float | None]:
    if run.environment.get("interrupted"):
        return "interrupted", None
    if run.stop is not None and run.stop.ended_run:
        return "stop_rule", STOP_RULE_GRACE_S
    load = run.scenario_config.get("load", {})
    grace = load.get("graceful_stop_s") if isinstance(load, dict) else None
    return "graceful_stop", float(grace) if isinstance(grace, (int, float)) else None


def cut_at_end_text(c: model.CutAtEnd) -> str:
    """The requests the run's end cut, how many had not started, and why they count so."""
    grace = "" if c.grace is None else f"{c.grace:g} s"
    if c.how == "graceful_stop":
        why = "the graceful stop ended" + (
            f" ({grace} after the last scheduled send)" if grace else ""
        )
    elif c.how == "stop_rule":
        why = "a [stop] rule ended the run" + (f" ({grace} grace)" if grace else "")
    else:
        why = "the run was interrupted"
    return (
        f"{c.requests:,} requests were still unanswered when {why}, "
        f"{c.age_min:.1f}-{c.age_max:.1f} s after their send: {c.waiting:,} had no first "
        f"token yet (still waiting to start), {c.streaming:,} were mid-answer. zqbench cut "
        "them (`interrupted`): they have no latency, and errors:rate counts them, as a "
        "client that gave up then would"
        + (" (a longer [load] graceful_stop lets them finish)" if c.how == "graceful_stop" else "")
    )


SECTION = sentence("cut_at_end", cut_at_end_text, cut_at_end)
