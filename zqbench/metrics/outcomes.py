"""Each request's outcome: was it served at once, queued, or refused, and was the refusal fast?

    served        admitted (2xx, no error) and its work started at once
    queued        admitted, but it waited before its work started
    refused_fast  refused (429, 503, 529) at once: the zero-queue answer past capacity
    refused_slow  refused after waiting as long as a queued request: a queue in disguise
    timed_out     no complete answer within the request timeout
    failed        any other failure (a transport error, another status, a broken stream)
    interrupted   cut by the run's end (graceful stop), not by the server
    undetermined  admitted, with nothing to judge its start by

The evidence, best first (docs/metrics.md, "Outcomes"):

server_queue  The server's own timing headers: X-Request-Dispatch-Time minus
              X-Request-Received-Time, on the server's clock. Queued when it exceeds
              `[outcomes] server_queue` (5 ms, conform's zeroqueue.3 bound).
ttft          Without the headers: TTFT against the target's unloaded TTFT for the request's
              prompt, B(p) = base + slope * p, fitted over the run's own set-up probes
              (zqbench.target.at_rest). Queued when TTFT > T(p) = 2 B(p) + max(margin, H / 2),
              H the run's median hold (how long a successful request streamed after its
              first token). The reasoning is conform's hidden-queue detector's
              (zqbench.conform.queueing): a request that waits for a slot waits for the one
              ahead to finish, at least B + H + B, while one that got a slot sees B stretched
              by its neighbours, which 2 B allows; T sits between the two, the margin keeps it
              above the client's own scheduling noise. p is the request's prompt tokens from
              its usage, else the largest probe's (the more lenient bound).
time_to_reject  A refusal is slow when it took longer than max(margin, H / 2) + 2 B0, B0 the
              fastest probe size's TTFT at rest: longer than a request waiting for the slot
              ahead would. A server that knows it is full knows it at once.

What decided each request is its `evidence`: server_queue, ttft, time_to_reject, status (a
failure's kind) or none (undetermined). The per-request columns go into samples.parquet
(`outcome`, `outcome_evidence`, `outcome_measure_s`, `outcome_bound_s`), the counts into
summary.json's `outcomes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zqbench.metrics import false_refusals
from zqbench.metrics.false_refusals import Judged
from zqbench.metrics.frame import NS_PER_S, REFUSAL_STATUSES, MetricFrame
from zqbench.metrics.migration import send_bins
from zqbench.summary import (
    AtRest,
    OutcomeBasis,
    OutcomeRules,
    Outcomes,
    OutcomesOverTime,
    OutcomeStage,
    ServerQueue,
    Unavailable,
    json_number,
)

OUTCOMES = (
    "served",
    "queued",
    "refused_fast",
    "refused_slow",
    "timed_out",
    "failed",
    "interrupted",
    "undetermined",
)
EVIDENCE = ("server_queue", "ttft", "time_to_reject", "status", "none")
SERVED, QUEUED, REFUSED_FAST, REFUSED_SLOW, TIMED_OUT, FAILED, INTERRUPTED, UNDETERMINED = range(
    len(OUTCOMES)
)
BY_SERVER_QUEUE, BY_TTFT, BY_TIME_TO_REJECT, BY_STATUS, BY_NONE = range(len(EVIDENCE))

DEFAULT_SERVER_QUEUE_S = 0.005  # conform's zeroqueue.3 bound on server_queue at rest
DEFAULT_MARGIN_S = 0.020  # conform's queue_margin floor: above a busy client's noise
DEFAULT_AT_REST_PROBES = 3  # per prompt size
BASELINE_FACTOR = 2.0  # as zqbench.conform.queueing
HOLD_FRACTION = 0.5

DEFAULT_RULES = OutcomeRules(
    server_queue=DEFAULT_SERVER_QUEUE_S,
    margin=DEFAULT_MARGIN_S,
    at_rest_probes=DEFAULT_AT_REST_PROBES,
)


@dataclass(frozen=True)
class Classified:
    """One value per request of the frame, in its order."""

    outcome: np.ndarray  # int8 index into OUTCOMES
    evidence: np.ndarray  # int8 index into EVIDENCE
    measure_s: np.ndarray  # float64: the value judged (NaN for status / none)
    bound_s: np.ndarray  # float64: the bound it was judged against (NaN likewise)
    hold_s: float | None
    refusals: Judged  # each refusal's occupancy and whether it was false

    @property
    def refused(self) -> np.ndarray:
        return (self.outcome == REFUSED_FAST) | (self.outcome == REFUSED_SLOW)

    def names(self) -> np.ndarray:
        return np.array(OUTCOMES, dtype=object)[self.outcome]

    def columns(self) -> dict[str, np.ndarray]:
        """The samples.parquet columns."""
        return {
            "outcome": self.names(),
            "outcome_evidence": np.array(EVIDENCE, dtype=object)[self.evidence],
            "outcome_measure_s": self.measure_s,
            "outcome_bound_s": self.bound_s,
            **self.refusals.columns(),
        }


def _ends_with(keys: np.ndarray, suffix: str) -> np.ndarray:
    return np.array([str(k).endswith(suffix) for k in keys], dtype=bool) if len(keys) else keys


def _key_flags(frame: MetricFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(refused, timed out, interrupted) per request, decided once per distinct status key."""
    keys, inverse = np.unique(frame.status_keys.astype(str), return_inverse=True)
    refusals = {str(code) for code in REFUSAL_STATUSES}
    refused = np.array([k in refusals for k in keys], dtype=bool)
    timed_out = _ends_with(keys, ":timeout")
    interrupted = _ends_with(keys, ":interrupted")
    return refused[inverse], timed_out[inverse], interrupted[inverse]


def hold_s(frame: MetricFrame) -> float | None:
    """Median seconds a successful request streamed after its first token."""
    c = frame.columns
    hold = (c.t_end - c.t_first_token)[frame.ok]
    hold = hold[~np.isnan(hold)]
    return float(np.median(hold)) / NS_PER_S if len(hold) else None


def allowance_s(rules: OutcomeRules, hold: float | None) -> float:
    """What a request may wait past twice its TTFT at rest: max(margin, H / 2)."""
    return max(rules.margin, HOLD_FRACTION * (hold or 0.0))


def queued_bound_s(at_rest: AtRest, prompt_tokens: np.ndarray, allowance: float) -> np.ndarray:
    """T(p) = 2 B(p) + allowance per request; p NaN (no usage): the largest probe's, the
    more lenient bound."""
    largest = max(p.prompt_tokens for p in at_rest.probes)
    tokens = np.where(np.isnan(prompt_tokens), largest, prompt_tokens)
    baseline = at_rest.base + at_rest.slope * tokens
    bound: np.ndarray = BASELINE_FACTOR * baseline + allowance
    return bound


def classify(
    frame: MetricFrame,
    basis: OutcomeBasis,
    server_queue: ServerQueue | Unavailable | None = None,
) -> Classified:
    """Every request's outcome and the evidence that decided it (vectorised); a refusal's
    falseness needs the target's capacity, which its running gauge may tell
    (`server_queue`, from its own metrics)."""
    n = frame.n
    outcome = np.full(n, FAILED, dtype=np.int8)
    evidence = np.full(n, BY_STATUS, dtype=np.int8)
    measure = np.full(n, np.nan)
    bound = np.full(n, np.nan)
    refused, timed_out, interrupted = _key_flags(frame)
    outcome[timed_out] = TIMED_OUT
    outcome[interrupted] = INTERRUPTED
    hold = hold_s(frame)
    allowance = allowance_s(basis.rules, hold)
    at_rest = basis.at_rest if isinstance(basis.at_rest, AtRest) else None

    ok = frame.ok
    sq = frame.values["server_queue"] / NS_PER_S
    by_header = ok & ~np.isnan(sq)
    measure[by_header] = sq[by_header]
    bound[by_header] = basis.rules.server_queue
    evidence[by_header] = BY_SERVER_QUEUE
    outcome[by_header] = np.where(sq[by_header] > basis.rules.server_queue, QUEUED, SERVED)

    ttft = frame.values["ttft"] / NS_PER_S
    by_ttft = ok & ~by_header & ~np.isnan(ttft)
    undetermined = ok & ~by_header & ~by_ttft
    if at_rest is None:
        undetermined |= by_ttft
        by_ttft[:] = False
    else:
        t = queued_bound_s(at_rest, frame.prompt_tokens, allowance)
        measure[by_ttft] = ttft[by_ttft]
        bound[by_ttft] = t[by_ttft]
        evidence[by_ttft] = BY_TTFT
        outcome[by_ttft] = np.where(ttft[by_ttft] > t[by_ttft], QUEUED, SERVED)
    outcome[undetermined] = UNDETERMINED
    evidence[undetermined] = BY_NONE

    c = frame.columns
    reject = (c.t_end - c.t_send) / NS_PER_S
    fastest = 0.0 if at_rest is None else _fastest_size_ttft(at_rest)
    reject_bound = allowance + BASELINE_FACTOR * fastest
    measure[refused] = reject[refused]
    bound[refused] = reject_bound
    evidence[refused] = BY_TIME_TO_REJECT
    outcome[refused] = np.where(reject[refused] > reject_bound, REFUSED_SLOW, REFUSED_FAST)
    refusals = false_refusals.judge(frame, refused, basis, server_queue)
    return Classified(outcome, evidence, measure, bound, hold, refusals)


def _fastest_size_ttft(at_rest: AtRest) -> float:
    """The median TTFT of the probe size with the lowest median."""
    by_size: dict[int, list[float]] = {}
    for p in at_rest.probes:
        by_size.setdefault(p.size, []).append(p.ttft)
    return min(float(np.median(v)) for v in by_size.values())


def _counts(codes: np.ndarray) -> dict[str, int]:
    hits = np.bincount(codes.astype(np.int64), minlength=len(OUTCOMES))
    return {name: int(hits[i]) for i, name in enumerate(OUTCOMES)}


def _shares(counts: dict[str, int]) -> tuple[float | None, float | None]:
    admitted = counts["served"] + counts["queued"]
    refusals = counts["refused_fast"] + counts["refused_slow"]
    return (
        counts["queued"] / admitted if admitted else None,
        counts["refused_slow"] / refusals if refusals else None,
    )


def _stage(codes: np.ndarray) -> OutcomeStage:
    counts = _counts(codes)
    queued, slow = _shares(counts)
    return OutcomeStage(counts=counts, admitted_queued_share=queued, refusals_slow_share=slow)


def over_time(
    frame: MetricFrame, codes: np.ndarray, duration_s: float
) -> OutcomesOverTime | Unavailable:
    """Outcome counts per bin of send time (the status mix's bins)."""
    if frame.n == 0:
        return Unavailable(unavailable="no request sent")
    width, bins, n_bins = send_bins(frame, duration_s)
    counts = {
        name: np.bincount(bins[codes == i], minlength=n_bins).astype(int).tolist()
        for i, name in enumerate(OUTCOMES)
    }
    return OutcomesOverTime(bin_s=width, start_s=[i * width for i in range(n_bins)], counts=counts)


def outcomes_summary(
    frame: MetricFrame, classified: Classified, basis: OutcomeBasis, duration_s: float
) -> Outcomes:
    counts = _counts(classified.outcome)
    queued, slow = _shares(counts)
    total = max(1, frame.n)
    evidence = np.bincount(classified.evidence.astype(np.int64), minlength=len(EVIDENCE))
    return Outcomes(
        basis=basis,
        hold=json_number(classified.hold_s),
        counts=counts,
        share={k: v / total for k, v in counts.items()},
        admitted_queued_share=queued,
        refusals_slow_share=slow,
        evidence={name: int(evidence[i]) for i, name in enumerate(EVIDENCE)},
        by_stage={str(s): _stage(classified.outcome[frame.stage == s]) for s in frame.stages},
        over_time=over_time(frame, classified.outcome, duration_s),
        false_refusals=false_refusals.false_refusals_summary(
            frame, classified.refusals, classified.refused
        ),
    )
