"""`[stop]`: rules that end a stage, or the run, once the target is saturated.

    [stop.error_rate]      a circuit breaker: failures and timeouts over a window
    [stop.queue_growth]    a queue forming: in-flight requests and their wait both rising
    [stop.queued_share]    too many admitted requests judged `queued` (zqbench.metrics.classify)

Each rule's keys (KEYS) and their defaults are its class's below; docs/scenarios.md#stop
says each. `ends = "stage"` skips the rest of the stage (later stages keep their planned
times); `ends = "run"` ends the load as a graceful stop does, with a 1 s grace for the
requests in flight. zqbench.pipeline.stopping applies them while the load runs: each rule's `judge`
reads its window (zqbench.stop.rules.Window), so the watcher never asks which rule it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from zqbench.errors import ScenarioError
from zqbench.metrics.classify import DEFAULT_MARGIN_S
from zqbench.stop import rules
from zqbench.stop.rules import Trip, Window
from zqbench.strict_toml import Table

Ends = Literal["stage", "run"]
ENDS: tuple[Ends, ...] = ("stage", "run")
MAX_WINDOW_S = 600.0  # evidence older than this says nothing about the server now


@dataclass(frozen=True, slots=True)
class ErrorRateRule:
    NAME: ClassVar[str] = "error_rate"
    KEYS: ClassVar[tuple[str, ...]] = ("above", "window", "min_requests", "count_refusals", "ends")
    above: float  # share of the window's answered requests that failed or timed out
    window_s: float = 5.0
    min_requests: int = 20
    # Refusals (429, 503, 529, or in disguise: refused_in_stream) are a zero-queue server's
    # honest answer, never failures, unless counted.
    count_refusals: bool = False
    ends: Ends = "run"  # a breaker: nothing later is worth sending to a failing target

    @classmethod
    def parse(cls, t: Table) -> ErrorRateRule:
        d = cls(above=1.0)
        share = _share_keys(t, d)
        return cls(*share, t.boolean("count_refusals", d.count_refusals), _ends(t, d.ends))

    def judge(self, w: Window) -> Trip | None:
        did = "failed, timed out or were refused" if self.count_refusals else "failed or timed out"
        what = f"requests answered in the last {self.window_s:g} s {did}"
        return rules.share_trip(self, *w.errors(self.count_refusals), what)


@dataclass(frozen=True, slots=True)
class QueueGrowthRule:
    NAME: ClassVar[str] = "queue_growth"
    KEYS: ClassVar[tuple[str, ...]] = ("window", "confidence", "min_rise", "min_requests", "ends")
    window_s: float = 3.0
    confidence: float = 0.95  # of the slopes' one-sided lower bounds
    # The least rise of the wait over the window; None: the outcome allowance,
    # max([outcomes] margin, half the hold so far).
    min_rise_s: float | None = None
    min_requests: int = 10
    ends: Ends = "stage"

    @classmethod
    def parse(cls, t: Table) -> QueueGrowthRule:
        d = cls()
        confidence = d.confidence
        if t.has("confidence"):
            confidence = t.number("confidence", minimum=0.5, strict=True)
            if confidence >= 1:
                raise t.fail("confidence", "must be below 1 (0.95: a one-sided 95% bound)")
        return cls(
            window_s=_window(t, d.window_s),
            confidence=confidence,
            min_rise_s=t.duration("min_rise", positive=True) if t.has("min_rise") else None,
            # A slope's bound has n - 2 degrees of freedom (zqbench.stop.rules.slope_bound):
            # fewer than 3 waits never judge, so a smaller minimum would only look as if it did.
            min_requests=_min_requests(t, d.min_requests, least=3, why=SLOPE_LEAST),
            ends=_ends(t, d.ends),
        )

    def judge(self, w: Window) -> Trip | None:
        min_rise = self.min_rise_s
        if min_rise is None:  # the outcome allowance; the margin itself without a basis
            min_rise = DEFAULT_MARGIN_S if w.allowance_s is None else w.allowance_s
        return rules.queue_growth(self, *w.waits(), w.inflight_t_s, w.inflight, min_rise)


@dataclass(frozen=True, slots=True)
class QueuedShareRule:
    NAME: ClassVar[str] = "queued_share"
    KEYS: ClassVar[tuple[str, ...]] = ("above", "window", "min_requests", "ends")
    above: float  # share of the window's judged admitted requests that were queued
    window_s: float = 5.0
    min_requests: int = 20
    ends: Ends = "stage"

    @classmethod
    def parse(cls, t: Table) -> QueuedShareRule:
        d = cls(above=1.0)
        return cls(*_share_keys(t, d), _ends(t, d.ends))

    def judge(self, w: Window) -> Trip | None:
        what = f"admitted requests in the last {self.window_s:g} s were queued"
        return rules.share_trip(self, *w.queued(), what)


Rule = ErrorRateRule | QueueGrowthRule | QueuedShareRule
# The rule types by [stop] name, in the order they are judged: a new rule is its class
# (NAME, KEYS, `parse`, `judge`), a line here and its StopConfig field.
RULE_TYPES: dict[str, type[Rule]] = {
    r.NAME: r for r in (ErrorRateRule, QueueGrowthRule, QueuedShareRule)
}
STOP_KEYS = tuple(RULE_TYPES)  # the [stop] table's keys: its rules' names


@dataclass(frozen=True, slots=True)
class StopConfig:
    error_rate: ErrorRateRule | None = None
    queue_growth: QueueGrowthRule | None = None
    queued_share: QueuedShareRule | None = None

    def rules(self) -> list[tuple[str, Rule]]:
        """The rules given, by name, in RULE_TYPES order."""
        return [(n, r) for n in RULE_TYPES if (r := getattr(self, n)) is not None]


def parse_stop(t: Table) -> StopConfig:
    """The `[stop]` table: each rule a sub-table of its own (module docstring)."""
    if not t.data:
        raise ScenarioError(
            f"{t.label}: [stop] names no rule; add one of "
            + ", ".join(f"[stop.{name}]" for name in RULE_TYPES)
        )
    given = {
        name: rule.parse(Table(t.label, t.key(name), t.data[name], rule.KEYS))
        for name, rule in RULE_TYPES.items()
        if t.has(name)
    }
    return StopConfig(**given)  # type: ignore[arg-type]


def _share_keys(t: Table, d: ErrorRateRule | QueuedShareRule) -> tuple[float, float, int]:
    """A share rule's first fields, read in their order: above, window, min_requests."""
    return _share(t), _window(t, d.window_s), _min_requests(t, d.min_requests)


def _share(t: Table) -> float:
    t.require("above", why=": the share (0 < above <= 1) past which the rule trips")
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


SLOPE_LEAST = "a slope's confidence bound needs 3 waits (n - 2 degrees of freedom)"


def _min_requests(t: Table, default: int, least: int = 2, why: str = "") -> int:
    if not t.has("min_requests"):
        return default
    # A whole number first (any), then the rule's own bound, with its reason.
    value = t.integer("min_requests", minimum=-(2**63))
    if value < least:
        raise t.fail("min_requests", f"must be >= {least}" + (f": {why}" if why else ""))
    return value


def _ends(t: Table, default: Ends) -> Ends:
    value = t.choice("ends", ENDS, default)
    return "run" if value == "run" else "stage"
