"""What the scenario's [stop] rules ended, in sentences: summary.md, report.html and the
terminal show the same ones.

    stop_lines(summary.stop)     one line per rule that tripped, then what was left unsent
"""

from __future__ import annotations

from zqbench import summary as model
from zqbench.metrics.sections.base import Section


def stop_lines(stop: model.Stop | None) -> tuple[str, ...]:
    """() when the scenario had no rules; one line saying none tripped when none did."""
    if stop is None:
        return ()
    if not stop.events:
        return (f"[stop] rules watched ({', '.join(stop.rules)}): none tripped",)
    lines = [_event_line(e, stop) for e in stop.events]
    if stop.not_sent:
        lines.append(
            f"{stop.not_sent:,} scheduled requests were not sent: their stage had ended "
            "(the achieved load is judged against the rest)"
        )
    return tuple(lines)


def _event_line(e: model.StopEvent, stop: model.Stop) -> str:
    last = e is stop.events[-1]
    if e.ends == "run":
        what = "the run"
    elif stop.ended_run and last:
        what = f"stage {e.stage_name}, the last, and with it the run"
    else:
        what = f"stage {e.stage_name}"
    return f"stopped by {e.rule} at {e.at:.1f} s, ending {what}: {e.reason}"


SECTION = Section(
    "stop",
    "banner",
    view=lambda s, _: stop_lines(s.stop) or None,
    lines=lambda s: list(stop_lines(s.stop)),
    compute=lambda frame, run: run.stop,
)
