"""summary.json's `cut_at_end` (computed by zqbench.metrics.cut_at_end): the requests the
run's end cut, in one sentence, in the verdict banner and the terminal."""

from __future__ import annotations

from zqbench import summary as model
from zqbench.metrics.cut_at_end import cut_at_end
from zqbench.metrics.sections.base import Section


def cut_at_end_text(c: model.CutAtEnd | None) -> str | None:
    """The requests the run's end cut, how many had not started, and why they count so."""
    if c is None:
        return None
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


SECTION = Section(
    "cut_at_end",
    "banner",
    view=lambda s, _: cut_at_end_text(s.cut_at_end),
    lines=lambda s: [text] if (text := cut_at_end_text(s.cut_at_end)) else [],
    compute=cut_at_end,
)
