"""How the reports write a number, once for summary.md, report.html and the terminal:
durations in ms with 4 significant digits, "–" for no value (never 0), "∞" for a percentile
that lands on a failure (the error-adjusted latency)."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from zqbench.metrics.sig_digits import significant
from zqbench.summary import JsonFloat, Summary

NO_VALUE = "–"
VERDICT_BADGE = {
    "pass": "✅ PASS",
    "fail": "❌ FAIL",
    "inconclusive": "⚠️ INCONCLUSIVE",
    "invalid": "🚫 INVALID",
}


class Fact(NamedTuple):
    """One labelled value of the run (run facts, environment, telemetry), or an unavailable
    metric and why it has no value; a (label, value) pair where a caller unpacks it."""

    label: str
    value: str


@dataclass(frozen=True)
class Figure:
    """A figure embedded in the page: `src` is a data: URI, so the page needs no file."""

    name: str
    title: str
    caption: str
    src: str


def figure(name: str, title: str, caption: str, png: bytes) -> Figure:
    """A figure with its PNG inlined as a data: URI."""
    src = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return Figure(name=name, title=title, caption=caption, src=src)


def number(value: JsonFloat) -> float | None:
    """A summary.json number: null -> None, "inf" (JSON has no infinity) -> inf."""
    return None if value is None else float(value)


def ms(value: JsonFloat) -> str:
    """Seconds as milliseconds with 4 significant digits, "∞" for "inf", NO_VALUE for null:
    every report's milliseconds (sweep.md's too)."""
    v = number(value)
    if v is None:
        return NO_VALUE
    return "∞" if math.isinf(v) else significant(v * 1e3)


def ms_text(value: JsonFloat) -> str:
    """Seconds as `12.3 ms`; NO_VALUE alone (no unit) for null."""
    return NO_VALUE if value is None else f"{ms(value)} ms"


def or_none(spec: str, suffix: str = "") -> Callable[[float | None], str]:
    """A number formatted by `spec` (then `suffix`), or NO_VALUE for null."""
    return lambda value: NO_VALUE if value is None else format(value, spec) + suffix


count = or_none(",")
share = or_none(".2%")
ratio = or_none(".3g")


def request_counts(summary: Summary) -> str:
    """What became of the requests sent, each outcome its own word: a zero-queue server's
    fast refusals are what it promises, never "failed" (the headline of every output)."""
    r, outcomes = summary.requests, summary.outcomes
    if outcomes is None:  # a run saved before zqbench judged outcomes
        return f"ok {count(r.ok)}, failed {count(r.failed)}"
    c = outcomes.counts
    served = c.get("served", 0) + c.get("queued", 0) + c.get("undetermined", 0)
    notes = [f"{count(c[k])} {word}" for k, word in _SERVED_NOTES if c.get(k)]
    fast, slow = c.get("refused_fast", 0), c.get("refused_slow", 0)
    disguised = c.get("refused_in_stream", 0)  # absent from runs saved before it
    refused = f"refused {count(fast + slow + disguised)}"
    if disguised:
        kinds = [f"{count(n)} {word}" for n, word in ((fast, "fast"), (slow, "slow")) if n]
        kinds.append(f"{count(disguised)} in disguise as 2xx")
        refused += f" ({', '.join(kinds)})"
    elif fast + slow:
        refused += " (all fast)" if not slow else f" ({count(fast)} fast, {count(slow)} slow)"
    failed = c.get("failed", 0) + c.get("timed_out", 0)
    parts = [
        f"served {count(served)}" + (f" ({', '.join(notes)})" if notes else ""),
        refused,
        f"failed {count(failed)}"
        + (f" ({count(c['timed_out'])} timed out)" if c.get("timed_out") else ""),
    ]
    if c.get("interrupted"):
        parts.append(f"cut at the end {count(c['interrupted'])}")
    return ", ".join(parts)


_SERVED_NOTES = (("queued", "after a queue"), ("undetermined", "not judged"))


def plain(value: object) -> str:
    """A value as the summary holds it (a name, a configured rate), or NO_VALUE for null."""
    return NO_VALUE if value is None else str(value)


def seconds(value: float) -> str:
    """A time in seconds, 3 significant digits: "0.0005 s", "1.5 s", "12.3 s"."""
    return f"{significant(value, 3)} s"


def stage_label(s: Summary, key: str) -> str:
    """A stage of a by-stage map (keyed by its index as a string), with its name if known."""
    names = {str(stage.index): stage.name for stage in s.stages}
    return f"stage {key} ({names[key]})" if key in names else f"stage {key}"


# Every template's filters for summary.json's values (outputs/templating.py).
FILTERS = {
    "ms": ms,
    "count": count,
    "share": share,
    "plain": plain,
    "ratio": ratio,
    "badge": VERDICT_BADGE.__getitem__,
    "request_counts": request_counts,
    "stage_label": lambda key, summary: stage_label(summary, key),
}
