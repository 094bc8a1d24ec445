"""summary.json's `sessions`: a sessions run's conversations, by turn and whole.

    by_turn        per turn index: requests, successes, TTFT and latency p50/p99, and the
                   mean prompt tokens of its successes (the context each turn carries)
    session_time   first send to last end of each completed session: every turn up to the
                   most any session sent, each answered

Absent outside a sessions run (no sample carries a turn) and in summaries before it.
"""

from __future__ import annotations

import numpy as np

from zqbench import summary as model
from zqbench.metrics import quantiles
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, Fact, ms
from zqbench.summary import json_number


def _q(sorted_s: np.ndarray, q: float) -> model.JsonFloat:
    return json_number(quantiles.quantile(sorted_s, q))


def sessions_summary(frame: MetricFrame) -> model.Sessions | None:
    has = ~np.isnan(frame.turn)
    if not has.any():
        return None
    turn = frame.turn[has].astype(np.int64)
    session = frame.session[has].astype(np.int64)
    ok = frame.ok[has]
    turns = int(turn.max()) + 1
    by_turn = []
    for k in range(turns):
        keep = np.zeros(frame.n, dtype=bool)
        keep[np.flatnonzero(has)[turn == k]] = True
        ttft = frame.sorted_seconds("ttft", keep)
        latency = frame.sorted_seconds("latency", keep)
        answered = keep & frame.ok
        prompt = frame.prompt_tokens[answered]
        prompt = prompt[~np.isnan(prompt)]
        by_turn.append(
            model.TurnStats(
                turn=k,
                requests=int(np.count_nonzero(keep)),
                ok=int(np.count_nonzero(answered)),
                ttft_p50=_q(ttft, 0.5),
                ttft_p99=_q(ttft, 0.99),
                latency_p50=_q(latency, 0.5),
                latency_p99=_q(latency, 0.99),
                prompt_tokens_mean=json_number(float(prompt.mean()) if len(prompt) else None),
            )
        )
    ids, inverse = np.unique(session, return_inverse=True)
    answered_turns = np.bincount(inverse, weights=ok, minlength=len(ids))
    sent_turns = np.bincount(inverse, minlength=len(ids))
    complete = (answered_turns == turns) & (sent_turns == turns)
    t_send = frame.columns.t_send[has].astype(np.float64)
    t_end = frame.columns.t_end[has].astype(np.float64)
    first = np.full(len(ids), np.inf)
    last = np.full(len(ids), -np.inf)
    np.minimum.at(first, inverse, t_send)
    np.maximum.at(last, inverse, t_end)
    times = np.sort((last - first)[complete]) / NS_PER_S
    return model.Sessions(
        turns=turns,
        sessions=len(ids),
        completed=int(np.count_nonzero(complete)),
        by_turn=by_turn,
        session_time_p50=_q(times, 0.5),
        session_time_p99=_q(times, 0.99),
        session_time_mean=json_number(float(times.mean()) if len(times) else None),
    )


def facts(entry: model.Sessions) -> tuple[Fact, ...]:
    """How many conversations, and how long the completed ones took."""
    started = f"{entry.sessions} started, {entry.completed} with all {entry.turns} turns answered"
    took = (
        f"p50 {ms(entry.session_time_p50)} ms, p99 {ms(entry.session_time_p99)} ms, "
        f"mean {ms(entry.session_time_mean)} ms"
    )
    return (Fact("sessions", started), Fact("session time (completed)", took))


def tokens(mean: model.JsonFloat) -> str:
    """A turn's mean prompt tokens (the context it carries), whole."""
    return NO_VALUE if mean is None else f"{mean:.0f}"


def lines(summary: model.Summary) -> list[str]:
    """The conversations, then TTFT p50 and context by turn."""
    entry = summary.sessions
    if entry is None:
        return []
    by_turn = ", ".join(
        f"{t.turn}: {ms(t.ttft_p50)} ms ({tokens(t.prompt_tokens_mean)} tok)" for t in entry.by_turn
    )
    rows = [f"  {fact.label}: {fact.value}" for fact in facts(entry)]
    return ["sessions:", *rows, f"  TTFT p50 by turn (prompt tokens): {by_turn}"]


SECTION = Section(
    "sessions",
    "late",
    lines=lines,
    compute=lambda frame, run: sessions_summary(frame),
    filters={"session_facts": facts, "mean_tokens": tokens},
)
