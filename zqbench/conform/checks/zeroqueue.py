"""zeroqueue.*: does the endpoint keep the zero-queue contract (DESIGN.md, timing headers)?

.1-.3  at rest: timing headers present, ordered, and server_queue p99 under a bound
.4     /health reports status and dispatch_jitter_us
       (.1-.4 check instrumentation: a target with none of it is `not instrumented`, model.py)
.5     the hidden-queue detector: stepping concurrency past capacity, no significant share
       of admitted requests may wait for a slot (judged on the tail: conform/queueing.py)
.6-.10 one burst past capacity: refusals (not waits or timeouts), as 503/529 statuses,
       fast, with Retry-After, and gone once the load drops
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from zqbench.conform import observations, queueing
from zqbench.conform.evidence import Evidence
from zqbench.conform.model import (
    Check,
    CheckResult,
    Phase,
    failed,
    passed,
    sequential,
    skipped,
    uninstrumented,
)
from zqbench.conform.observations import Observations, Overload, Settled, SlopeRun, SlopeStep
from zqbench.dialects.common import parse_epoch, parse_retry_after
from zqbench.printable import shown

REFUSAL_STATUSES = (503, 529)  # the zero-queue refusal: overloaded, retry elsewhere or later
HEADERS = ("x-request-received-time", "x-request-dispatch-time", "x-request-start-time")
# Stamps carry microsecond digits; allow for their rounding when comparing two of them.
STAMP_SLACK_S = 2e-6
# A queue shows as admitted requests waiting far longer than one request alone does.
QUEUE_FACTOR = 3.0
QUEUE_MARGIN_MS = 20.0


_ms, _p = queueing.ms, queueing.percentile


def _stamps(ex: Evidence) -> tuple[float | None, ...]:
    return tuple(parse_epoch(ex.headers.get(h)) for h in HEADERS)


def _admitted(exchanges: list[Evidence]) -> list[Evidence]:
    return [ex for ex in exchanges if ex.admission == "admitted"]


AT_REST = ("at_rest",)
OVERLOAD = ("overload",)


# ------------------------------------------------------------------ at rest
NO_STAMPS = "no X-Request-Received/Dispatch/Start-Time headers"


def _required(obs: Observations) -> bool:
    return obs.target.options.require_instrumentation


def headers_present(obs: Observations) -> CheckResult:
    admitted = _admitted(obs.at_rest())
    if not admitted:
        return skipped("no request was admitted at low load")
    if not any(h in ex.headers for ex in admitted for h in HEADERS):
        return uninstrumented(_required(obs), NO_STAMPS, responses=len(admitted))
    for ex in admitted:
        for name, value in zip(HEADERS, _stamps(ex), strict=True):
            if value is None:
                raw = ex.headers.get(name)
                why = "absent" if raw is None else f"not epoch seconds: {raw[:40]!r}"
                return failed(f"{name} {why}", response=ex.evidence(body=False))
    return passed(f"all three timing headers on {len(admitted)} admitted responses")


def headers_ordered(obs: Observations) -> CheckResult:
    admitted = _admitted(obs.at_rest())
    checked = 0
    for ex in admitted:
        received, dispatch, start = _stamps(ex)
        if received is None or dispatch is None or start is None:
            continue  # zeroqueue.1 reports missing stamps
        checked += 1
        stamps = {"received": received, "dispatch": dispatch, "start": start}
        if not received <= dispatch + STAMP_SLACK_S or not dispatch <= start + STAMP_SLACK_S:
            return failed(
                "the stamps are not ordered received <= dispatch <= start",
                stamps=stamps,
                response=ex.evidence(body=False),
            )
        # Clock-offset free: the server was sent the request before it received it, so if
        # the server's (start - received) is longer than the client's (send -> first body
        # byte), compute started after the first body byte had already left.
        if ex.t_first_byte is None:
            continue
        server_span = start - received
        client_span = (ex.t_first_byte - ex.t_send) / 1e9
        if server_span > client_span + STAMP_SLACK_S:
            return failed(
                f"start is {_ms(server_span * 1e3)} ms after received, but the first body byte "
                f"arrived {_ms(client_span * 1e3)} ms after the send: start came after it",
                stamps=stamps,
                response=ex.evidence(body=False),
            )
    if not checked:
        if not any(h in ex.headers for ex in admitted for h in HEADERS):
            return uninstrumented(False, NO_STAMPS)
        return skipped("no response carried all three stamps (see zeroqueue.1)")
    return passed(f"ordered on {checked} responses, start before the first body byte")


def server_queue(obs: Observations) -> CheckResult:
    queue_ms = []
    for ex in _admitted(obs.at_rest()):
        received, dispatch, _ = _stamps(ex)
        if received is not None and dispatch is not None:
            queue_ms.append((dispatch - received) * 1e3)
    if not queue_ms:
        if not any(h in ex.headers for ex in _admitted(obs.at_rest()) for h in HEADERS):
            return uninstrumented(False, NO_STAMPS)
        return skipped("no received/dispatch stamps to measure (see zeroqueue.1)")
    bound = obs.target.options.server_queue_bound_ms
    return _p99_within("server_queue", queue_ms, bound, " at low load")


def _p99_within(name: str, ms: list[float], bound: float, at: str = "", **more: Any) -> CheckResult:
    """The p99 of `ms` at most `bound` (milliseconds); `more` joins a failure's evidence."""
    p99 = _p(ms, 0.99)
    evidence = {"n": len(ms), "p50_ms": _ms(_p(ms, 0.5)), "p99_ms": _ms(p99), "bound_ms": bound}
    if p99 > bound:
        return failed(f"{name} p99 {_ms(p99)} ms > {bound} ms{at}", **more, **evidence)
    return passed(f"{name} p99 {_ms(p99)} ms <= {bound} ms", **evidence)


def health(obs: Observations) -> CheckResult:
    ex = obs.exchange("health")
    obj = ex.json()
    if not isinstance(obj, dict) or "dispatch_jitter_us" not in obj:
        # Engines answer /health with an empty 200 (vLLM) or {"status": "ok"} (llama.cpp):
        # health, not the dispatch jitter this check reads.
        what = f"GET /health: status {ex.status or ex.error}, no `dispatch_jitter_us`"
        return uninstrumented(_required(obs), what, response=ex.evidence())
    if ex.status != 200:
        return failed(f"GET /health: status {ex.status or ex.error}", response=ex.evidence())
    jitter = obj.get("dispatch_jitter_us")
    if not isinstance(obj.get("status"), str):
        return failed("/health has no string `status`", response=ex.evidence())
    if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or jitter < 0:
        return failed(
            "/health has no non-negative number `dispatch_jitter_us`", response=ex.evidence()
        )
    return passed(f"status {obj['status']!r}, dispatch_jitter_us {jitter}")


# ------------------------------------------------------------------ the hidden-queue detector
def _unjudged_row(step: SlopeStep) -> dict[str, Any]:
    """A step with no threshold to judge it by (nothing streamed at the lowest step): what its
    requests got, so the evidence still shows why."""
    outcomes = Counter(ex.admission for ex in step.exchanges)
    errors = Counter(ex.error for ex in step.exchanges if ex.error)
    statuses = Counter(str(ex.status) for ex in step.exchanges if ex.status)
    return {
        "concurrency": step.concurrency,
        "requests": len(step.exchanges),
        "outcomes": dict(outcomes),
        "statuses": dict(statuses),
        "errors": dict(errors),
        "ttft_ms": sorted(round(t, 3) for ex in step.exchanges if (t := ex.ttft_ms) is not None),
    }


def hidden_queue(obs: Observations) -> CheckResult:
    """Judged on each step's tail (zqbench.conform.queueing holds the rule and its reasons)."""
    o = obs.target.options
    run = obs.get("slope", SlopeRun)
    j = obs.judgement()
    evidence: dict[str, Any] = {
        "baseline_ttft_ms": _ms(j.baseline_ms),
        "hold_ms": _ms(j.hold_ms),
        "threshold_ms": _ms(j.threshold_ms),
        "queue_share": o.queue_share,
        "capacity": None if run.capacity is None else asdict(run.capacity),
        "steps_asked": list(run.asked),
        "steps_added": list(run.added),
        "steps": [s.row() for s in j.steps] or [_unjudged_row(s) for s in run.steps],
        "settled": asdict(obs.get("settle.load", Settled)),
        "median_slope": queueing.slope_evidence(run.steps, o.seed),
    }
    if j.threshold_ms is None:
        return skipped("no admitted request streamed a first token at the lowest step", **evidence)
    if j.queueing:
        first = j.queueing[0]
        evidence["queueing_steps"] = [s.concurrency for s in j.queueing]
        return failed(
            f"a hidden queue at concurrency {first.concurrency}: {first.waited} of "
            f"{first.judged} requests ({first.waited / first.judged:.0%}, CI low "
            f"{first.ci_low:.0%}) had TTFT > {j.threshold_ms:.0f} ms ({j.baseline_ms:.1f} ms "
            "at rest)",
            **evidence,
        )
    top = max(s.concurrency for s in j.steps)
    known = "unknown" if run.capacity is None else str(run.capacity.value)
    if not j.past_capacity:
        return skipped(
            f"no step went past capacity (nothing refused up to {top} concurrent requests, "
            f"capacity {known}): raise --slope-steps",
            **evidence,
        )
    worst = max(j.steps, key=lambda s: (s.waited / max(s.judged, 1), s.concurrency))
    return passed(
        f"no queue up to {top} concurrent requests (capacity {known}): at most {worst.waited} "
        f"of {worst.judged} had TTFT > {j.threshold_ms:.0f} ms (at {worst.concurrency})",
        **evidence,
    )


# ------------------------------------------------------------------ overload
def _burst(obs: Observations) -> tuple[dict[str, list[Evidence]], dict[str, Any]]:
    """The overload burst's requests by admission, and its summary for the evidence."""
    kinds: dict[str, list[Evidence]] = {}
    for ex in obs.get("overload", Overload).burst:
        kinds.setdefault(ex.admission, []).append(ex)
    counts = {k: len(v) for k, v in sorted(kinds.items())}
    return kinds, {"concurrency": obs.target.options.overload_concurrency, "counts": counts}


def _refusals(obs: Observations) -> list[Evidence]:
    return _burst(obs)[0].get("refused", [])


def refuses(obs: Observations) -> CheckResult:
    kinds, summary = _burst(obs)
    if kinds.get("failed"):
        ex = kinds["failed"][0]
        return failed(
            f"{len(kinds['failed'])} requests failed ({ex.error or ex.answer_error}) instead of "
            "being refused",
            response=ex.evidence(body=False),
            **summary,
        )
    if kinds.get("refused") or kinds.get("refused_in_stream"):
        return passed("the endpoint refused part of the burst", **summary)
    # Nothing refused: either the capacity exceeds the burst, or the extra requests waited.
    ttfts = queueing.admitted_ttfts(obs.get("overload", Overload).burst)
    baseline = observations.baseline_ttft_ms(obs.at_rest())
    summary |= {"baseline_ttft_ms": baseline, "burst_ttft_max_ms": _ms(max(ttfts, default=0))}
    if baseline is not None and ttfts and max(ttfts) > QUEUE_FACTOR * baseline + QUEUE_MARGIN_MS:
        return failed(
            f"nothing refused under {summary['concurrency']} concurrent requests; admitted ones "
            f"waited up to {max(ttfts):.1f} ms for a first token vs {baseline:.1f} ms alone: "
            "a queue",
            **summary,
        )
    return skipped("the burst did not exceed capacity (raise --overload-concurrency)", **summary)


def refusal_status(obs: Observations) -> CheckResult:
    kinds, summary = _burst(obs)
    disguised = kinds.get("refused_in_stream", [])
    if disguised:
        ex = disguised[0]
        total = len(disguised) + len(kinds.get("refused", []))
        ctype = shown(ex.headers.get("content-type", "no content-type"), 80)
        words = ex.error_words()
        said = "no message" if words is None else f'"{shown(words, 120)}"'
        return failed(
            f"{len(disguised)} of {total} refusals came in disguise: {ex.status} {ctype} with "
            f"the server's overload error inside, before any token ({said})",
            in_disguise={
                "count": len(disguised),
                "status": ex.status,
                "content_type": ctype,
                "server_says": None if words is None else shown(words, 120),
            },
            response=ex.evidence(),
            **summary,
        )
    refusals = kinds.get("refused", [])
    if not refusals:
        return skipped("nothing was refused (see zeroqueue.6)", **summary)
    wrong = [ex for ex in refusals if ex.status not in REFUSAL_STATUSES]
    if wrong:
        statuses = sorted({ex.status for ex in wrong})
        return failed(
            f"refusals with status {statuses}, not 503/529", response=wrong[0].evidence(), **summary
        )
    return passed(f"{len(refusals)} refusals, all 503/529", **summary)


def refusal_fast(obs: Observations) -> CheckResult:
    refusals = _refusals(obs)
    if not refusals:
        return skipped("nothing was refused with a status (see zeroqueue.6)")
    times = [(ex.t_end - ex.t_send) / 1e6 for ex in refusals]
    slowest = max(refusals, key=lambda ex: ex.t_end - ex.t_send).evidence()
    bound = obs.target.options.refusal_bound_ms
    return _p99_within("time_to_reject", times, bound, slowest=slowest)


def refusal_retry_after(obs: Observations) -> CheckResult:
    refusals = _refusals(obs)
    if not refusals:
        return skipped("nothing was refused with a status (see zeroqueue.6)")
    for ex in refusals:
        if parse_retry_after(ex.headers) is None:
            return failed("a refusal without a parseable Retry-After", response=ex.evidence())
    return passed(f"Retry-After on all {len(refusals)} refusals")


def recovers(obs: Observations) -> CheckResult:
    o = obs.get("overload", Overload)
    kinds, summary = _burst(obs)
    if not kinds.get("refused") and not kinds.get("refused_in_stream"):
        return skipped("nothing was refused in the burst (see zeroqueue.6)", **summary)
    bound = obs.target.options.recovery_s
    statuses = [ex.status for ex in o.recovery]
    evidence = {"after_burst_statuses": statuses[:50], "bound_s": bound}
    if o.recovery_s is None or o.recovery_s > bound:
        when = "never" if o.recovery_s is None else f"after {o.recovery_s:.2f} s"
        last = o.recovery[-1].evidence() if o.recovery else None
        return failed(
            f"refusals went on once the load dropped (recovered {when}, bound {bound} s)",
            last=last,
            **evidence,
        )
    return passed(f"admitted again {o.recovery_s:.3f} s after the burst", **evidence)


CHECKS = [
    Check(
        "zeroqueue.1",
        "Admitted responses carry X-Request-Received/Dispatch/Start-Time as epoch seconds.",
        headers_present,
        AT_REST,
        instrumentation=True,
    ),
    Check(
        "zeroqueue.2",
        "Timing stamps are ordered received <= dispatch <= start, and start "
        "precedes the first body byte.",
        headers_ordered,
        AT_REST,
        instrumentation=True,
    ),
    Check(
        "zeroqueue.3",
        "server_queue (dispatch - received) p99 stays under the bound at low load.",
        server_queue,
        AT_REST,
        instrumentation=True,
    ),
    Check(
        "zeroqueue.4",
        "GET /health returns JSON with `status` and `dispatch_jitter_us`.",
        health,
        ("health",),
        instrumentation=True,
    ),
    Check(
        "zeroqueue.5",
        "Past capacity no admitted request waits for a slot: at no concurrency step does a "
        "significant share get its first token a service time late (no hidden queue).",
        hidden_queue,
        ("at_rest", "settle.load", "slope"),
    ),
    Check(
        "zeroqueue.6",
        "Past capacity the endpoint refuses requests rather than queueing them or timing out.",
        refuses,
        ("at_rest", "overload"),
    ),
    Check(
        "zeroqueue.7",
        "Refusals are HTTP 503 or 529 statuses (not 429, not a 200 stream with an error event).",
        refusal_status,
        OVERLOAD,
    ),
    Check(
        "zeroqueue.8",
        "Refusals arrive within the bound (time_to_reject p99).",
        refusal_fast,
        OVERLOAD,
    ),
    Check(
        "zeroqueue.9",
        "Refusals carry a parseable Retry-After (or retry-after-ms).",
        refusal_retry_after,
        OVERLOAD,
    ),
    Check("zeroqueue.10", "Refusals stop once the load drops.", recovers, OVERLOAD),
]
PHASES: list[Phase] = [sequential("health", lambda t: [("GET /health", t.get("/health"))])]
