"""What the plan's phases observed (phases.py), as the checks read it.

Each phase leaves one observation under its name. A check declares the phases it reads
(`Check.needs`) and judges a view holding those alone (`Observations.view`): one that reads
an observation it did not declare fails loudly (MissingObservation, a crashed check), so a
check can never depend on what another check happened to measure before it.

    at_rest     the low-load requests, one at a time            list[Evidence]
    settle.*    requests until the endpoint is back at rest     Settled
    slope       bursts at rising concurrency                     SlopeRun
    overload    one burst past capacity, then recovery           Overload
    retry       a burst, its refusals retried at Retry-After     retry.RetryRun
    disconnect  streams cut, new requests sent (two rounds)      DisconnectRounds
    api.*, http.*, health, errors.*: the named exchanges of a sequential phase

Derived facts are pure functions of these: the at-rest TTFT, the capacity (capacity.py),
the hidden-queue judgement (queueing.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from zqbench.conform import capacity, queueing
from zqbench.conform.capacity import Capacity
from zqbench.conform.context import Target
from zqbench.conform.evidence import Evidence

T = TypeVar("T")
Named = list[tuple[str, Evidence]]  # a sequential phase's exchanges, each with its case


@dataclass
class SlopeStep:
    concurrency: int
    rounds: list[list[Evidence]]  # each burst of `concurrency` requests, in order
    duration_s: float

    @property
    def exchanges(self) -> list[Evidence]:
        return [ex for burst in self.rounds for ex in burst]


@dataclass(frozen=True)
class Settled:
    probes: int  # requests sent until back at rest (or settle_s ran out)
    waited_s: float
    at_rest: bool | None  # False: still busy when settle_s ran out (measured anyway);
    # None: no at-rest TTFT to compare with
    bound_ms: float | None  # the TTFT that counts as at rest


@dataclass
class SlopeRun:
    steps: list[SlopeStep]  # the steps that ran, in order of rising concurrency
    capacity: Capacity | None  # advertised, else discovered while the steps ran
    asked: tuple[int, ...]  # --slope-steps
    added: tuple[int, ...]  # steps added to reach 2x the capacity


@dataclass
class Overload:
    burst: list[Evidence]
    recovery: list[Evidence]  # sequential requests after the burst, until recovered
    recovery_s: float | None  # burst end -> first of `recovery_requests` admissions in a row


class MissingObservation(LookupError):
    """A check read an observation it did not declare (a bug in the check)."""


@dataclass(frozen=True)
class Observations:
    target: Target
    results: dict[str, Any] = field(default_factory=dict)  # phase name -> observation
    seen: tuple[Evidence, ...] = ()  # every exchange of the run, in order (headers.*)
    stopped: str | None = None  # why the plan stopped measuring (conform.hung); None: it did not

    def measured(self, phases: Iterable[str]) -> bool:
        return set(phases) <= self.results.keys()

    def view(self, needs: Iterable[str]) -> Observations:
        """These observations with only `needs` readable (a check's declared phases)."""
        wanted = set(needs)
        return replace(self, results={k: v for k, v in self.results.items() if k in wanted})

    def get(self, phase: str, kind: type[T]) -> T:
        """The observation of `phase`, a `kind`."""
        if phase not in self.results:
            raise MissingObservation(f"{phase!r} was not declared by the check, or not measured")
        return cast(T, self.results[phase])

    def named(self, phase: str) -> Named:
        return self.get(phase, list)

    def exchange(self, phase: str) -> Evidence:
        """The one exchange of a one-request phase."""
        ((_, ex),) = self.named(phase)
        return ex

    def at_rest(self) -> list[Evidence]:
        return self.get("at_rest", list)

    # ------------------------------------------------------------ derived
    def capacity(self) -> Capacity | None:
        """What zeroqueue.11-13 judge by: the slope's capacity (advertised or discovered),
        else estimated from the slope steps and the overload burst (capacity.estimated)."""
        run, burst = self.get("slope", SlopeRun), self.get("overload", Overload).burst
        if run.capacity is not None:
            return run.capacity
        return capacity.estimated([*(ex for s in run.steps for ex in s.exchanges), *burst])

    def judgement(self) -> queueing.Judgement:
        """The slope steps judged (zeroqueue.5 reports it, .13 takes its T)."""
        o, run = self.target.options, self.get("slope", SlopeRun)
        return queueing.judge(
            run.steps,
            baseline_ms=baseline_ttft_ms(self.at_rest()),
            capacity=run.capacity,
            margin_ms=o.queue_margin_ms,
            share=o.queue_share,
        )


def baseline_ttft_ms(at_rest: list[Evidence]) -> float | None:
    """The median TTFT of the admitted requests at rest (the upper one of an even count)."""
    ttfts = sorted(queueing.admitted_ttfts(at_rest))
    return ttfts[len(ttfts) // 2] if ttfts else None
