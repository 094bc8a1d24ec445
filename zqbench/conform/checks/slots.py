"""zeroqueue.11-13: the slots behind the refusals. A zero-queue endpoint refuses only when
its slots are full, tells the truth about when one frees (Retry-After), and frees a slot
when its client goes away.

.11  no false refusals: none at rest, none under load while this client held fewer requests
     than the capacity (conform/refusals.py)
.12  a refusal retried when its Retry-After said is admitted (conform/retry.py)
.13  streams cut mid-generation free their slots: as many new requests get in, promptly
     (conform/disconnect.py)

Each judges by the capacity Observations.capacity() gives (advertised, discovered, else the most
requests the run saw admitted at once), and says which it was.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from zqbench.conform import disconnect, queueing, refusals
from zqbench.conform.disconnect import DisconnectRounds, DisconnectRun
from zqbench.conform.evidence import Evidence
from zqbench.conform.model import Check, CheckResult, failed, passed, skipped
from zqbench.conform.observations import Observations, Overload, SlopeRun
from zqbench.conform.retry import RetryRun
from zqbench.metrics.classify import DEFAULT_MARGIN_S

LISTED = 5  # false refusals shown in the evidence


def _capacity(obs: Observations) -> dict[str, Any] | None:
    known = obs.capacity()
    return None if known is None else asdict(known)


# ------------------------------------------------------------------ .11
def false_refusals(obs: Observations) -> CheckResult:
    known = obs.capacity()
    groups: list[tuple[str, list[Evidence]]] = [("at rest", obs.at_rest())]
    groups += [
        (f"slope step {s.concurrency}", s.exchanges) for s in obs.get("slope", SlopeRun).steps
    ]
    groups.append(("overload burst", obs.get("overload", Overload).burst))
    judged = refusals.judge(groups, None if known is None else known.value)
    if not judged:
        return skipped("nothing was refused at rest, in the slope steps or in the burst")
    false = [j for j in judged if j.false]
    at_rest = [j for j in false if j.where == "at rest"]
    loaded = [j for j in judged if j.where != "at rest"]
    false_loaded = [j for j in loaded if j.false]
    t0 = min(ex.t_send for _, exs in groups for ex in exs)
    bound = obs.target.options.false_refusal_share
    share = len(false_loaded) / len(loaded) if loaded else 0.0
    evidence: dict[str, Any] = {
        "refusals": len(judged),
        "false": len(false),
        "refusals_at_rest": len(judged) - len(loaded),
        "false_under_load": len(false_loaded),
        "false_share_under_load": round(share, 4),
        "bound": bound,
        "capacity": _capacity(obs),
        "grace_ms": DEFAULT_MARGIN_S * 1e3,
        "first_false": [
            {
                "where": j.where,
                "t_s": round((j.ex.t_send - t0) / 1e9, 3),  # after the first judged request
                "occupancy": j.occupancy,
                "status": j.ex.status,
            }
            for j in false[:LISTED]
        ],
    }
    if known is None and loaded:
        evidence["note"] = "no capacity known: refusals under load are not judged"
    if at_rest:
        n = len(obs.at_rest())
        return failed(
            f"{len(at_rest)} of {n} requests at rest were refused, with nothing else in flight",
            **evidence,
        )
    if share > bound:
        first = false_loaded[0]
        cap = "" if known is None else f" of {known.value}"
        return failed(
            f"{len(false_loaded)} of {len(loaded)} refusals under load ({share:.0%} > "
            f"{bound:.0%}) came with a slot free: the first in the {first.where}, "
            f"{first.occupancy}{cap} slots held",
            **evidence,
        )
    return passed(
        f"none at rest; {len(false_loaded)} of {len(loaded)} refusals under load came with a "
        f"slot free ({share:.0%} <= {bound:.0%})",
        **evidence,
    )


# ------------------------------------------------------------------ .12
def retry_after_honoured(obs: Observations) -> CheckResult:
    run = obs.get("retry", RetryRun)
    if run.error is not None:
        return failed(f"the burst could not start: {run.error}")
    counts = Counter(ex.admission for ex in run.burst)
    summary: dict[str, Any] = {
        "concurrency": obs.target.options.overload_concurrency,
        "counts": dict(sorted(counts.items())),
        "with_retry_after": run.with_retry_after,
        "capacity": _capacity(obs),
        "sample_size": run.size,
    }
    if not counts.get("refused"):
        return skipped(
            "nothing in the burst was refused with a status (see zeroqueue.6)", **summary
        )
    if not run.sample:
        return skipped("no refusal carried a Retry-After (see zeroqueue.9)", **summary)
    honoured = sum(1 for r in run.sample if r.honoured)
    share = honoured / len(run.sample)
    later = [a for r in run.sample if not r.honoured and (a := r.admitted_after_s) is not None]
    bound = obs.target.options.retry_share
    evidence = {
        **summary,
        "retried": len(run.sample),
        "honoured": honoured,
        "honoured_share": round(share, 4),
        "bound": bound,
        "admitted_later_after_s": [round(a, 3) for a in later],
        "never_admitted": len(run.sample) - honoured - len(later),
        "retries": [r.row() for r in run.sample],
    }
    said = ", ".join(f"{s:g}" for s in sorted({r.retry_after_s for r in run.sample}))
    reason = (
        f"{honoured} of {len(run.sample)} refusals retried when Retry-After said ({said} s) "
        "were admitted"
    )
    if share < bound:
        return failed(f"{reason} ({share:.0%} < {bound:.0%})", **evidence)
    return passed(reason, **evidence)


# ------------------------------------------------------------------ .13
def disconnect_frees(obs: Observations) -> CheckResult:
    rounds = obs.get("disconnect", DisconnectRounds)
    run = rounds.first
    if run is None:
        return skipped("no capacity known and nothing admitted to estimate it by")
    if run.error is not None:
        return failed(f"the streams could not start: {run.error}")
    evidence = _disconnect_evidence(obs, run)
    if run.live < run.n:
        last = [a[-1] for a in run.streams if a]
        ended = sum(1 for ex in last if ex.admission == "admitted")
        refused = sum(1 for ex in last if ex.admission != "admitted" and ex.error != "interrupted")
        return skipped(
            f"only {run.live} of {run.n} streams were generating at the hang-up ({ended} ended "
            f"first, {refused} never got in): the slots were never all held",
            **evidence,
        )
    judged = obs.judgement()
    threshold = disconnect.threshold_ms(judged, run)
    again = rounds.again  # measured when this round's new requests were slow (disconnect.py)
    if again is not None and again.error is None and again.live == again.n:
        first = {
            "ttft_max_ms": queueing.ms(disconnect.slowest_first_token(run, threshold)),
            "threshold_ms": queueing.ms(threshold),
            "new_requests": evidence["new_requests"],
        }
        run, evidence = again, _disconnect_evidence(obs, again)
        threshold = disconnect.threshold_ms(judged, run)
        evidence["first_round"] = first
    return _judge_disconnect(run, threshold, evidence)


def _disconnect_evidence(obs: Observations, run: DisconnectRun) -> dict[str, Any]:
    would = run.would_run_s()
    evidence: dict[str, Any] = {
        "streams": run.n,
        "capacity": _capacity(obs),
        "max_tokens": run.max_tokens,
        "bound_s": run.bound_s,
        "streams_live": run.live,
        "stream_attempts": [len(a) for a in run.streams],
        "cut_after_tokens": [ex.text_events for ex in run.cut],
        "would_have_run_s": None if would is None else round(would, 3),
    }
    if run.gauge is not None:
        g = run.gauge
        evidence["gauge"] = {
            "name": g.name,
            "before": g.before,
            "peak_after_hang_up": g.peak,
            "fell_after_s": g.fell_s,
            "readings": g.readings[:60],
        }
    at_once = [ex.ttft_ms for ex in run.at_once if ex.admission == "admitted"]
    evidence["at_once_on_free_slots"] = {
        "sent": len(run.at_once),
        "admitted": len(at_once),
        "ttft_ms": [queueing.ms(t) for t in at_once],
        "median_ttft_ms": queueing.ms(disconnect.at_once_ttft_ms(run)),
    }
    admitted = run.admitted
    evidence["new_requests"] = {
        "admitted": len(admitted),
        "attempts": [len(a) for a in run.fresh],
        "admitted_after_s": [round((ex.t_send - run.t_hang_up) / 1e9, 3) for ex in admitted],
        "ttft_ms": [queueing.ms(ex.ttft_ms) for ex in admitted],
    }
    return evidence


def _judge_disconnect(
    run: DisconnectRun, threshold: float | None, evidence: dict[str, Any]
) -> CheckResult:
    bound, would = run.bound_s, run.would_run_s()
    evidence["threshold_ms"] = queueing.ms(threshold)
    admitted = run.admitted
    if run.gauge is not None and run.gauge.fell_s is None:
        return failed(
            f"{run.gauge.name} stayed above {run.gauge.before:g} for {bound:g} s after "
            f"{run.n} streams hung up (peak {run.gauge.peak})",
            **evidence,
        )
    if len(admitted) < run.n:
        return failed(
            f"{run.n - len(admitted)} of {run.n} new requests were refused for {bound:g} s after "
            f"{run.n} streams hung up mid-generation: their slots stayed taken",
            **evidence,
        )
    if (slowest := disconnect.slowest_first_token(run, threshold)) is not None:
        return failed(
            f"{run.n} new requests after {run.n} streams hung up were admitted, but waited up to "
            f"{slowest:.0f} ms for a first token (> {threshold:.0f} ms): queued behind the "
            "cut generations" + (" in both rounds" if "first_round" in evidence else ""),
            **evidence,
        )
    latest = max((ex.t_send - run.t_hang_up) / 1e9 for ex in admitted)
    if would is not None and latest > would:
        return skipped(
            f"the last new request got in {latest:.2f} s after the hang-up, when the cut "
            f"streams would have ended anyway ({would:.2f} s): raise disconnect_max_tokens",
            **evidence,
        )
    fell = ""
    if run.gauge is not None and run.gauge.fell_s is not None:
        fell = f"; {run.gauge.name} back to {run.gauge.before:g} in {run.gauge.fell_s:.3f} s"
    ttfts = queueing.admitted_ttfts(admitted)
    worst = f", TTFT max {max(ttfts):.0f} ms" if ttfts else ""
    return passed(
        f"{run.n} streams cut mid-generation, then {run.n} new requests admitted at once"
        f"{worst}{fell}",
        **evidence,
    )


CHECKS = [
    Check(
        "zeroqueue.11",
        "Refusals come only when the endpoint is full: none at rest, none while this client "
        "held fewer requests than the capacity.",
        false_refusals,
        ("at_rest", "slope", "overload"),
    ),
    Check(
        "zeroqueue.12",
        "Retry-After is honoured: a refusal retried when it said is admitted.",
        retry_after_honoured,
        ("slope", "overload", "retry"),
    ),
    Check(
        "zeroqueue.13",
        "A client that disconnects frees its slot: after streams are cut mid-generation, as "
        "many new requests are admitted at once, promptly.",
        disconnect_frees,
        ("at_rest", "slope", "overload", "disconnect"),
    ),
]
