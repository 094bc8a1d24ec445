"""summary.json's `sessions` (computed by zqbench.metrics.sessions): how many
conversations, how long, and each turn as the context grows."""

from __future__ import annotations

from dataclasses import dataclass

from zqbench import summary as model
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import NO_VALUE, Fact, ms
from zqbench.metrics.sessions import sessions_summary
from zqbench.summary import Summary


@dataclass(frozen=True)
class TurnRow:
    turn: str
    requests: str
    ok: str
    ttft_p50: str  # ms
    ttft_p99: str
    latency_p50: str
    latency_p99: str
    prompt_tokens: str  # mean of the successful ones


@dataclass(frozen=True)
class SessionsView:
    """A sessions run: how many conversations, how long, and each turn as context grows."""

    facts: tuple[Fact, ...]
    rows: tuple[TurnRow, ...]


def sessions_view(entry: model.Sessions | None) -> SessionsView | None:
    if entry is None:
        return None
    facts = (
        Fact(
            "sessions",
            f"{entry.sessions} started, {entry.completed} with all {entry.turns} turns answered",
        ),
        Fact(
            "session time (completed)",
            f"p50 {ms(entry.session_time_p50)} ms, p99 {ms(entry.session_time_p99)} ms, "
            f"mean {ms(entry.session_time_mean)} ms",
        ),
    )
    rows = tuple(
        TurnRow(
            turn=str(t.turn),
            requests=str(t.requests),
            ok=str(t.ok),
            ttft_p50=ms(t.ttft_p50),
            ttft_p99=ms(t.ttft_p99),
            latency_p50=ms(t.latency_p50),
            latency_p99=ms(t.latency_p99),
            prompt_tokens=NO_VALUE
            if t.prompt_tokens_mean is None
            else f"{t.prompt_tokens_mean:.0f}",
        )
        for t in entry.by_turn
    )
    return SessionsView(facts, rows)


def lines(summary: Summary) -> list[str]:
    """The conversations, then TTFT p50 and context by turn."""
    sessions = sessions_view(summary.sessions)
    if sessions is None:
        return []
    by_turn = ", ".join(f"{r.turn}: {r.ttft_p50} ms ({r.prompt_tokens} tok)" for r in sessions.rows)
    facts = [f"  {fact.label}: {fact.value}" for fact in sessions.facts]
    return ["sessions:", *facts, f"  TTFT p50 by turn (prompt tokens): {by_turn}"]


SECTION = Section(
    "sessions",
    "late",
    view=lambda s, _: sessions_view(s.sessions),
    lines=lines,
    compute=lambda frame, run: sessions_summary(frame),
)
