"""`[stop]`: rules that end a stage, or the run, once the target is saturated.

    [stop.error_rate]      a circuit breaker: failures and timeouts over a window
    above = 0.5            share of the window's answered requests (0 < above <= 1)
    window = "5s"
    min_requests = 20      fewer answered in the window: no verdict yet
    count_refusals = false refusals (429, 503, 529) are a zero-queue server's honest answer
    ends = "run"

    [stop.queue_growth]    a queue forming: in-flight requests and their wait both rising
    window = "3s"
    confidence = 0.95      of the slopes' lower bounds (one-sided)
    min_rise = "80ms"      least rise of the wait over the window; absent: the outcome
                           allowance, max([outcomes] margin, half the hold so far)
    min_requests = 10
    ends = "stage"

    [stop.queued_share]    too many admitted requests judged `queued` (zqbench.metrics.outcomes)
    above = 0.5
    window = "5s"
    min_requests = 20
    ends = "stage"

`ends = "stage"` skips the rest of the stage (later stages keep their planned times);
`ends = "run"` ends the load as a graceful stop does, with a 1 s grace for the requests in
flight. zqbench.pipeline.stopping applies them while the load runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from zqbench.errors import ScenarioError
from zqbench.strict_toml import Table

Ends = Literal["stage", "run"]
ENDS: tuple[Ends, ...] = ("stage", "run")
RULES = ("error_rate", "queue_growth", "queued_share")
STOP_KEYS = RULES
_ERROR_RATE_KEYS = ("above", "window", "min_requests", "count_refusals", "ends")
_QUEUE_GROWTH_KEYS = ("window", "confidence", "min_rise", "min_requests", "ends")
_QUEUED_SHARE_KEYS = ("above", "window", "min_requests", "ends")
MAX_WINDOW_S = 600.0  # evidence older than this says nothing about the server now


@dataclass(frozen=True, slots=True)
class ErrorRateRule:
    above: float  # share of the window's answered requests that failed or timed out
    window_s: float = 5.0
    min_requests: int = 20
    count_refusals: bool = False
    ends: Ends = "run"  # a breaker: nothing later is worth sending to a failing target


@dataclass(frozen=True, slots=True)
class QueueGrowthRule:
    window_s: float = 3.0
    confidence: float = 0.95
    min_rise_s: float | None = None  # None: the outcome allowance (module docstring)
    min_requests: int = 10
    ends: Ends = "stage"


@dataclass(frozen=True, slots=True)
class QueuedShareRule:
    above: float  # share of the window's judged admitted requests that were queued
    window_s: float = 5.0
    min_requests: int = 20
    ends: Ends = "stage"


Rule = ErrorRateRule | QueueGrowthRule | QueuedShareRule


@dataclass(frozen=True, slots=True)
class StopConfig:
    error_rate: ErrorRateRule | None = None
    queue_growth: QueueGrowthRule | None = None
    queued_share: QueuedShareRule | None = None

    def rules(self) -> list[tuple[str, Rule]]:
        """The rules given, by name, in RULES order."""
        return [(n, r) for n in RULES if (r := getattr(self, n)) is not None]


def parse_stop(t: Table) -> StopConfig:
    """The `[stop]` table: each rule a sub-table of its own (module docstring)."""
    if not t.data:
        raise ScenarioError(
            f"{t.label}: [stop] names no rule; add one of "
            + ", ".join(f"[stop.{name}]" for name in RULES)
        )
    return StopConfig(
        error_rate=_error_rate(_sub(t, "error_rate", _ERROR_RATE_KEYS)),
        queue_growth=_queue_growth(_sub(t, "queue_growth", _QUEUE_GROWTH_KEYS)),
        queued_share=_queued_share(_sub(t, "queued_share", _QUEUED_SHARE_KEYS)),
    )


def _sub(t: Table, name: str, keys: tuple[str, ...]) -> Table | None:
    if not t.has(name):
        return None
    return Table(t.label, t.key(name), t.data[name], keys)


def _share(t: Table) -> float:
    if not t.has("above"):
        raise t.missing("above", ": the share (0 < above <= 1) past which the rule trips")
    share = t.number("above", strict=True)
    if share > 1:
        raise t.fail("above", "must be a share of the window's requests, 0 < above <= 1")
    return share


def _window(t: Table, default: float) -> float:
    if not t.has("window"):
        return default
    window = t.duration("window", positive=True)
    if window > MAX_WINDOW_S:
        raise t.fail("window", f"must be at most {MAX_WINDOW_S:g}s")
    return window


def _min_requests(t: Table, default: int) -> int:
    return t.integer("min_requests", minimum=2) if t.has("min_requests") else default


def _ends(t: Table, default: Ends) -> Ends:
    value = t.choice("ends", ENDS, default)
    return "run" if value == "run" else "stage"


def _error_rate(t: Table | None) -> ErrorRateRule | None:
    if t is None:
        return None
    d = ErrorRateRule(above=1.0)
    return ErrorRateRule(
        above=_share(t),
        window_s=_window(t, d.window_s),
        min_requests=_min_requests(t, d.min_requests),
        count_refusals=t.boolean("count_refusals", d.count_refusals),
        ends=_ends(t, d.ends),
    )


def _queue_growth(t: Table | None) -> QueueGrowthRule | None:
    if t is None:
        return None
    d = QueueGrowthRule()
    confidence = d.confidence
    if t.has("confidence"):
        confidence = t.number("confidence", minimum=0.5, strict=True)
        if confidence >= 1:
            raise t.fail("confidence", "must be below 1 (0.95: a one-sided 95% bound)")
    return QueueGrowthRule(
        window_s=_window(t, d.window_s),
        confidence=confidence,
        min_rise_s=t.duration("min_rise", positive=True) if t.has("min_rise") else None,
        min_requests=_min_requests(t, d.min_requests),
        ends=_ends(t, d.ends),
    )


def _queued_share(t: Table | None) -> QueuedShareRule | None:
    if t is None:
        return None
    d = QueuedShareRule(above=1.0)
    return QueuedShareRule(
        above=_share(t),
        window_s=_window(t, d.window_s),
        min_requests=_min_requests(t, d.min_requests),
        ends=_ends(t, d.ends),
    )
