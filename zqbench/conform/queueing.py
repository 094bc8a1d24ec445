"""Did admitted requests wait for a slot? The hidden-queue detector's judgement (zeroqueue.5),
made on the tail of each concurrency step, never on its median.

Per step of `c` concurrent requests (the plan's slope phase):

    B  baseline: median TTFT at rest (the low-load requests; else the lowest step's)
    H  hold: median time a request of the lowest step streams after its first token
    T  threshold = 2 B + max(queue_margin_ms, H / 2)
    judged  admitted requests, and requests that timed out before a first token
    waited  judged requests whose TTFT > T, or that timed out before a first token

A step *queues* when the Wilson 95% lower bound of waited / judged is above `queue_share`
(10%), and waited requests recur: they show in more than half of the step's rounds. The
check fails when a step queues; the evidence names the first such step.

Why T (`zqbench run` judges a request queued by the same bound: zqbench.metrics.classify).
A request that waits for a slot waits for the request ahead of it to finish: its
first token comes no sooner than B (the one ahead's first token) + H (the rest of that
stream) + B (its own prefill), 2 B + H. A request that got a slot at once sees B, stretched
by its neighbours (a batched prefill, a busy client): 2 B allows that doubling. The margin
takes half of H, the least extra wait a queue adds, so T sits halfway between the two; its
floor (20 ms by default) keeps it above client and OS scheduling noise on a busy machine
when H is short. A queue whose service time is under about twice the floor is out of
reach: raise `slope_max_tokens` so that H grows.

Why a share, and its lower bound. A median hides a queue that holds half of the requests or
fewer (16 on 8 slots: exactly half wait), and a slope fitted to medians only rises once more
than half wait; the slope is still reported (`median_slope`), as secondary evidence that
never decides. One request in ten waiting a service time is a queue a client sees at p90.
The lower bound keeps a few slow requests from failing a server: 1 of 12 over T gives a
lower bound of 1.5%, 3 of 12 gives 8.9%, 4 of 12 gives 13.8%, 24 of 48 gives 36%.

Why recurrence. The requests of one round are not independent: the admitted ones share a
batch, so one stall of the server or of the client (a GC pause, a descheduled process on a
busy machine) delays them all, and 4 admitted requests of 12 at once make a significant
share. Each round is a fresh burst past capacity, so a real queue shows in every round; a
stall shows in one.

Refused requests are not judged: a refusal is the zero-queue answer past capacity, and the
refusal checks (zeroqueue.6-9) judge it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zqbench.conform.capacity import Capacity
from zqbench.conform.evidence import Evidence
from zqbench.conform.stats import median_slope
from zqbench.metrics.classify import BASELINE_FACTOR, allowance
from zqbench.metrics.quantiles import rank, wilson_interval

if TYPE_CHECKING:
    from zqbench.conform.observations import SlopeStep


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (the one definition zqbench uses: metrics.quantiles.rank)."""
    return sorted(values)[rank(q, len(values)) - 1]


def ms(x: float | None) -> float | None:
    """Milliseconds as the evidence shows them (to the microsecond)."""
    return None if x is None else round(x, 3)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 0.5) if values else None


def admitted_ttfts(exchanges: Sequence[Evidence]) -> list[float]:
    """TTFT (ms) of each admitted request that streamed a first token."""
    return [t for ex in exchanges if ex.admission == "admitted" and (t := ex.ttft_ms) is not None]


def _timed_out(ex: Evidence) -> bool:
    """No first token before --timeout: it waited longer than anything admitted did."""
    return ex.error == "timeout" and ex.ttft_ms is None


def hold_ms(ex: Evidence) -> float | None:
    """How long an admitted request streamed after its first token (its slot's hold)."""
    ttft = ex.ttft_ms
    if ex.admission != "admitted" or ttft is None:
        return None
    return (ex.t_end - ex.t_send) / 1e6 - ttft


@dataclass(frozen=True, slots=True)
class StepVerdict:
    concurrency: int
    offered_rps: float
    admitted: int
    refused: int  # a non-2xx status, or an error event in a 2xx stream
    failed: int  # no complete answer (timeouts among them count as waited)
    ttfts: tuple[float, ...]
    judged: int
    waited: int
    ci_low: float | None  # None: nothing judged (the interval of 0 of 0 has no value)
    ci_high: float | None
    rounds: int
    rounds_waited: int  # rounds with at least one waited request
    queues: bool

    def row(self) -> dict[str, Any]:
        t = self.ttfts
        return {
            "concurrency": self.concurrency,
            "offered_rps": self.offered_rps,
            "admitted": self.admitted,
            "refused": self.refused,
            "failed": self.failed,
            "ttft_p50_ms": ms(median(t)),
            "ttft_p90_ms": ms(percentile(t, 0.9)) if t else None,
            "ttft_max_ms": ms(max(t, default=None)),
            "waited": self.waited,
            "waited_share": round(self.waited / self.judged, 4) if self.judged else None,
            "waited_share_ci95": None
            if self.ci_low is None or self.ci_high is None
            else [round(self.ci_low, 4), round(self.ci_high, 4)],
            "rounds": self.rounds,
            "rounds_waited": self.rounds_waited,
            "queues": self.queues,
        }


def _waited(exchanges: Sequence[Evidence], threshold_ms: float) -> tuple[int, int]:
    """(judged, waited) among `exchanges`."""
    ttfts = admitted_ttfts(exchanges)
    timed_out = sum(1 for ex in exchanges if _timed_out(ex))
    return len(ttfts) + timed_out, sum(1 for t in ttfts if t > threshold_ms) + timed_out


def judge_step(step: SlopeStep, threshold_ms: float, share: float) -> StepVerdict:
    kinds = [ex.admission for ex in step.exchanges]
    judged, waited = _waited(step.exchanges, threshold_ms)
    low, high = wilson_interval(waited, judged)
    # Recurrence: the requests of one round share the server's fate (one batch, one stall),
    # so a queue must show in most of the step's independent rounds, not in one.
    rounds_waited = sum(1 for burst in step.rounds if _waited(burst, threshold_ms)[1])
    return StepVerdict(
        concurrency=step.concurrency,
        offered_rps=round(len(step.exchanges) / max(step.duration_s, 1e-9), 1),
        admitted=kinds.count("admitted"),
        refused=kinds.count("refused") + kinds.count("refused_in_stream"),
        failed=kinds.count("failed"),
        ttfts=tuple(admitted_ttfts(step.exchanges)),
        judged=judged,
        waited=waited,
        ci_low=low,
        ci_high=high,
        rounds=len(step.rounds),
        rounds_waited=rounds_waited,
        queues=low is not None and low > share and 2 * rounds_waited > len(step.rounds),
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    baseline_ms: float | None  # None: nothing to judge against (no TTFT at rest or step 1)
    hold_ms: float | None
    threshold_ms: float | None
    steps: tuple[StepVerdict, ...]
    capacity: Capacity | None

    @property
    def queueing(self) -> list[StepVerdict]:
        return [s for s in self.steps if s.queues]

    @property
    def past_capacity(self) -> bool:
        """Some step offered more than the endpoint computes at once (so a queue could show)."""
        if any(s.refused for s in self.steps):
            return True
        top = max((s.concurrency for s in self.steps), default=0)
        return self.capacity is not None and top > self.capacity.value


def judge(
    steps: Sequence[SlopeStep],
    *,
    baseline_ms: float | None,
    capacity: Capacity | None,
    margin_ms: float,
    share: float,
) -> Judgement:
    """Each step judged against T; `baseline_ms` None: the lowest step's median TTFT."""
    lowest = steps[0].exchanges if steps else []
    baseline = baseline_ms if baseline_ms is not None else median(admitted_ttfts(lowest))
    hold = median([h for ex in lowest if (h := hold_ms(ex)) is not None])
    if baseline is None or hold is None:
        return Judgement(baseline, hold, None, (), capacity)
    threshold = BASELINE_FACTOR * baseline + allowance(margin_ms, hold)
    verdicts = tuple(judge_step(s, threshold, share) for s in steps)
    return Judgement(baseline, hold, threshold, verdicts, capacity)


def slope_evidence(steps: Sequence[SlopeStep], seed: int) -> dict[str, Any] | None:
    """The median-TTFT slope (ms per concurrent request) with its 95% interval."""
    fit = median_slope([(s.concurrency, admitted_ttfts(s.exchanges)) for s in steps], seed=seed)
    if fit is None:
        return None
    return {
        "ms_per_request": round(fit.slope, 4),
        "ci95_ms": [round(fit.ci_low, 4), round(fit.ci_high, 4)],
        "note": "secondary: a median hides a queue that holds half the requests or fewer",
    }
