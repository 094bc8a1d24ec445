"""The outcome kernel: the one judgement of a batch of requests, after the run and live.

answer   how the server answered, from status and error alone (ANSWERS): ok (2xx, no
         error), refused (429, 503, 529, the answer whole), refused_in_stream (a refusal in
         disguise: a 2xx answer carrying an overload error before any token, the dialect
         parser's error class of that name), timed_out, interrupted (cut by the run's end),
         failed. One sample decides it: the live exposition's `outcome` label
         (samples/live_counts.py) is the answer. Both refusals are REFUSALS.
outcome  what the request met (OUTCOMES): served, queued, refused_fast, refused_slow,
         refused_in_stream, timed_out, failed, interrupted, undetermined (admitted, nothing
         to judge its start by). Every refusal is one of REFUSED_OUTCOMES. The evidence,
         best first (docs/metrics.md, "Outcomes", says why):

    server_queue    admitted with timing headers: queued when dispatch - received exceeds
                    `[outcomes] server_queue` (5 ms, conform's zeroqueue.3 bound)
    ttft            else queued when TTFT > T(p) = 2 B(p) + max(margin, H / 2), B(p) =
                    base + slope * p the target's TTFT at rest (zqbench.target.at_rest),
                    p the prompt's tokens (unknown: the largest probe's), H the median hold
    time_to_reject  a refusal is slow past max(margin, H / 2) + 2 B0, B0 the fastest probe
                    size's TTFT at rest: longer than a wait for the slot ahead would take;
                    a refusal in disguise is refused_in_stream however long it took (its
                    measure t_end - t_send, no bound): its form is the finding
    status, none    failures by kind; undetermined

`classify` is called by metrics/outcomes.py on the run's frame and by the [stop] watcher
(pipeline/stopping.py) on its live window; conform's hidden-queue threshold is `allowance`'s
(zqbench.conform.queueing), and the margin is also the grace of false refusals, conform's
included.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from zqbench.dialects.common import OVERLOAD_CODES
from zqbench.dialects.common import REFUSED_IN_STREAM as REFUSED_IN_STREAM_ERROR
from zqbench.summary import AtRest, OutcomeBasis, OutcomeRules

REFUSAL_STATUSES = tuple(sorted(OVERLOAD_CODES))  # 429, 503, 529
# What every output says of a refused_in_stream request, beside its name.
IN_DISGUISE = "a refusal in disguise: 2xx, overload error inside"
ANSWERS = ("ok", "refused", "refused_in_stream", "timed_out", "interrupted", "failed")
OUTCOMES = (
    "served", "queued", "refused_fast", "refused_slow", "refused_in_stream", "timed_out",
    "failed", "interrupted", "undetermined",
)  # fmt: skip
EVIDENCE = ("server_queue", "ttft", "time_to_reject", "status", "none")
(
    SERVED, QUEUED, REFUSED_FAST, REFUSED_SLOW, REFUSED_IN_STREAM, TIMED_OUT, FAILED,
    INTERRUPTED, UNDETERMINED,
) = range(len(OUTCOMES))  # fmt: skip
REFUSED_OUTCOMES = (REFUSED_FAST, REFUSED_SLOW, REFUSED_IN_STREAM)
REFUSED_NAMES = tuple(OUTCOMES[i] for i in REFUSED_OUTCOMES)
BY_SERVER_QUEUE, BY_TTFT, BY_TIME_TO_REJECT, BY_STATUS, BY_NONE = range(len(EVIDENCE))

DEFAULT_SERVER_QUEUE_S = 0.005  # conform's zeroqueue.3 bound on server_queue at rest
# Above a busy client's noise; also the grace a slot is held past an answer's last byte (a
# server writes it, then frees the slot): false refusals' and conform's.
DEFAULT_MARGIN_S = 0.020
DEFAULT_AT_REST_PROBES = 3  # per prompt size
BASELINE_FACTOR = 2.0  # an unqueued TTFT may double under load
HOLD_FRACTION = 0.5  # ... plus half of the least wait a queue adds

DEFAULT_RULES = OutcomeRules(
    server_queue=DEFAULT_SERVER_QUEUE_S,
    margin=DEFAULT_MARGIN_S,
    at_rest_probes=DEFAULT_AT_REST_PROBES,
)


class Answer(IntEnum):  # index into ANSWERS
    OK, REFUSED, REFUSED_IN_STREAM, TIMED_OUT, INTERRUPTED, FAILED = range(len(ANSWERS))


REFUSALS = (Answer.REFUSED, Answer.REFUSED_IN_STREAM)

# The members as plain globals: a global read costs less than an Enum attribute's, and
# answer_of runs for every sample on a worker's event loop.
_OK, _REFUSED, _REFUSED_IN_STREAM, _TIMED_OUT, _INTERRUPTED, _FAILED = Answer


def answer_of(status: int, error: str | None) -> Answer:
    """How the server answered one request (the module's docstring)."""
    if error is None and 200 <= status < 300:
        return _OK
    if error is None or error == f"http_{status}":  # the server's own answer, whole
        return _REFUSED if status in REFUSAL_STATUSES else _FAILED
    if error == "timeout":
        return _TIMED_OUT
    if error == REFUSED_IN_STREAM_ERROR and 200 <= status < 300:
        return _REFUSED_IN_STREAM
    return _INTERRUPTED if error == "interrupted" else _FAILED


# One answered request as the live listeners get it (zqbench.engines.live.live_answer): ns on
# the run's clock, -1 where there is none (or prompt tokens are unknown); `answer` indexes
# ANSWERS. A batch is an array of these, read by field name (`rows["ttft"]`).
_LIVE_FIELDS = ("stage", "t_send", "t_end", "ttft", "server_queue", "hold", "prompt_tokens")
LIVE_ANSWER = np.dtype([(name, np.int64) for name in (*_LIVE_FIELDS, "answer")])


@dataclass(frozen=True)
class Batch:
    """What `classify` reads of each request: one array per field, one row per request."""

    answer: np.ndarray  # int: index into ANSWERS
    ttft_s: np.ndarray  # float64; NaN: no first token
    server_queue_s: np.ndarray  # float64; NaN: no timing headers
    reject_s: np.ndarray  # float64: t_end - t_send
    prompt_tokens: np.ndarray  # float64; NaN: unknown


def live_batch(rows: np.ndarray) -> Batch:
    """The kernel's batch of LIVE_ANSWER rows."""

    def seconds(name: str) -> np.ndarray:
        ns = rows[name]
        return np.where(ns >= 0, ns / 1e9, np.nan)

    tokens = rows["prompt_tokens"]
    return Batch(
        answer=rows["answer"],
        ttft_s=seconds("ttft"),
        server_queue_s=seconds("server_queue"),
        reject_s=(rows["t_end"] - rows["t_send"]) / 1e9,
        prompt_tokens=np.where(tokens >= 0, tokens, np.nan).astype(float),
    )


@dataclass(frozen=True)
class Classes:
    """One value per request of the batch, in its order."""

    outcome: np.ndarray  # int8 index into OUTCOMES
    evidence: np.ndarray  # int8 index into EVIDENCE
    measure_s: np.ndarray  # float64: the value judged (NaN for status / none)
    bound_s: np.ndarray  # float64: the bound it was judged against (NaN likewise)

    @property
    def refused(self) -> np.ndarray:
        return np.isin(self.outcome, REFUSED_OUTCOMES)

    def names(self) -> np.ndarray:
        return np.array(OUTCOMES, dtype=object)[self.outcome]


def allowance(margin: float, hold: float | None) -> float:
    """What a request may wait past twice its TTFT at rest: max(margin, H / 2), in the
    units of its arguments (conform's are milliseconds)."""
    return max(margin, HOLD_FRACTION * (hold or 0.0))


def queued_bound_s(at_rest: AtRest, prompt_tokens: np.ndarray, allowed: float) -> np.ndarray:
    """T(p) = 2 B(p) + allowance per request; p NaN (no usage): the largest probe's, the
    more lenient bound."""
    largest = max(p.prompt_tokens for p in at_rest.probes)
    tokens = np.where(np.isnan(prompt_tokens), largest, prompt_tokens)
    baseline = at_rest.base + at_rest.slope * tokens
    bound: np.ndarray = BASELINE_FACTOR * baseline + allowed
    return bound


def _fastest_size_ttft(at_rest: AtRest) -> float:
    """The median TTFT of the probe size with the lowest median."""
    by_size: dict[int, list[float]] = {}
    for p in at_rest.probes:
        by_size.setdefault(p.size, []).append(p.ttft)
    return min(float(np.median(v)) for v in by_size.values())


def classify(batch: Batch, basis: OutcomeBasis | None, hold_s: float | None) -> Classes:
    """Every request's outcome and the evidence that decided it (vectorised), by `basis`'s
    rules and TTFT at rest (None, or no baseline: an admitted request without headers is
    undetermined); `hold_s`: the median hold of the answers it is judged with."""
    rules = DEFAULT_RULES if basis is None else basis.rules
    at_rest = None if basis is None or not isinstance(basis.at_rest, AtRest) else basis.at_rest
    a = batch.answer
    n = len(a)
    outcome = np.full(n, FAILED, dtype=np.int8)
    evidence = np.full(n, BY_STATUS, dtype=np.int8)
    measure = np.full(n, np.nan)
    bound = np.full(n, np.nan)
    outcome[a == Answer.TIMED_OUT] = TIMED_OUT
    outcome[a == Answer.INTERRUPTED] = INTERRUPTED
    allowed = allowance(rules.margin, hold_s)

    ok = a == Answer.OK
    sq = batch.server_queue_s
    by_header = ok & ~np.isnan(sq)
    measure[by_header] = sq[by_header]
    bound[by_header] = rules.server_queue
    evidence[by_header] = BY_SERVER_QUEUE
    outcome[by_header] = np.where(sq[by_header] > rules.server_queue, QUEUED, SERVED)

    ttft = batch.ttft_s
    by_ttft = ok & ~by_header & ~np.isnan(ttft)
    undetermined = ok & ~by_header & ~by_ttft
    if at_rest is None:
        undetermined |= by_ttft
    else:
        t = queued_bound_s(at_rest, batch.prompt_tokens, allowed)
        measure[by_ttft] = ttft[by_ttft]
        bound[by_ttft] = t[by_ttft]
        evidence[by_ttft] = BY_TTFT
        outcome[by_ttft] = np.where(ttft[by_ttft] > t[by_ttft], QUEUED, SERVED)
    outcome[undetermined] = UNDETERMINED
    evidence[undetermined] = BY_NONE

    refused = a == Answer.REFUSED
    reject = batch.reject_s
    fastest = 0.0 if at_rest is None else _fastest_size_ttft(at_rest)
    reject_bound = allowed + BASELINE_FACTOR * fastest
    measure[refused] = reject[refused]
    bound[refused] = reject_bound
    evidence[refused] = BY_TIME_TO_REJECT
    outcome[refused] = np.where(reject[refused] > reject_bound, REFUSED_SLOW, REFUSED_FAST)

    disguised = a == Answer.REFUSED_IN_STREAM
    measure[disguised] = reject[disguised]
    evidence[disguised] = BY_TIME_TO_REJECT
    outcome[disguised] = REFUSED_IN_STREAM
    return Classes(outcome, evidence, measure, bound)
