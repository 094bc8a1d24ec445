"""The plan: every measurement conform makes, as phases in one fixed order, run before any
check judges (MLPerf LoadGen's habit: run what the settings describe, log it, judge the log).

A run measures the phases its selected checks need (`Check.needs`) and those they build on
(`Phase.after`), always in PLAN's order, whatever the catalogue's order:

    at_rest        sequential small streams: the endpoint at rest, before anything else
    api.*, http.*, health            light requests, each phase its checks' own
    settle.load    back at rest before the load (see settle)
    slope          bursts at rising concurrency, past the capacity (capacity.py)
    overload       one burst past capacity, then sequential requests until recovered
    retry          a burst of its own, its refusals retried at Retry-After (retry.py)
    disconnect     streams cut mid-generation, new requests sent (disconnect.py)
    settle.errors  back at rest: a slot a cut stream still holds would turn a malformed
                   input into a refusal
    errors.*       malformed inputs last: errors.4's 32 MiB prompt kept a one-core
                   llama.cpp busy for 14-50 s after conform gave up on it

The load phases come after the light ones so that nothing light lands in a burst, and .12's
and .13's own load after the measurements .11 judges (a burst, streams that would take
their slots). Settling happens only here, where the plan says.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from zqbench.conform import capacity, disconnect, hung, loadclient, retry
from zqbench.conform.capacity import Capacity
from zqbench.conform.checks import api, errors, transport, zeroqueue
from zqbench.conform.context import Sender
from zqbench.conform.evidence import Evidence
from zqbench.conform.model import Phase
from zqbench.conform.observations import (
    Observations,
    Overload,
    Settled,
    SlopeRun,
    SlopeStep,
    baseline_ttft_ms,
)
from zqbench.dialects import DIALECTS

SETTLE_RUN = 3  # admitted requests in a row with an at-rest TTFT: back at rest
SETTLE_FACTOR = 1.5  # of the at-rest median TTFT, plus SETTLE_MARGIN_MS for a busy client
SETTLE_MARGIN_MS = 2.0


def at_rest(sender: Sender, obs: Observations) -> list[Evidence]:
    """Sequential streamed requests on one connection: the endpoint at rest."""
    o = sender.target.options
    req = sender.target.generate(sender.target.api, stream=True, max_tokens=4)
    deadline = time.monotonic() + o.check_time_s
    out = []
    for _ in range(o.low_load_requests):
        if time.monotonic() > deadline:
            break
        out.append(sender.send(req))
    return out


def settle(sender: Sender, obs: Observations) -> Settled:
    """Sequential at-rest-sized requests until the endpoint answers as it did at rest,
    before a stage that needs it so. A heavy measurement before it can keep a one-core
    server busy for tens of seconds after conform stopped waiting for it, and a TTFT
    measured meanwhile is the leftover work's. At rest: SETTLE_RUN admitted requests in a
    row, each within SETTLE_FACTOR of the at-rest median TTFT (nothing to compare with when
    the plan measured no at_rest: no request)."""
    baseline = baseline_ttft_ms(obs.results.get("at_rest", []))
    if baseline is None:
        return Settled(0, 0.0, None, None)
    bound = SETTLE_FACTOR * baseline + SETTLE_MARGIN_MS
    t = sender.target
    req = t.generate(t.api, stream=True, max_tokens=4)  # as the at-rest requests
    start = time.monotonic()
    deadline = start + t.options.settle_s
    run = probes = 0
    while run < SETTLE_RUN and time.monotonic() < deadline:
        ex = sender.send(req)
        probes += 1
        ttft = ex.ttft_ms if ex.admission == "admitted" else None
        # A refusal says nothing of leftover work: a server that refuses now and then at
        # rest (zeroqueue.11's fault) would otherwise never settle and cost settle_s.
        if ex.admission != "refused":
            run = run + 1 if ttft is not None and ttft <= bound else 0
        if ttft is None:
            time.sleep(0.05)  # refused or failed: give it room (bounded by the deadline)
    waited = round(time.monotonic() - start, 3)
    return Settled(probes, waited, run >= SETTLE_RUN, round(bound, 3))


def slope(sender: Sender, _: Observations) -> SlopeRun:
    """Bursts of `c` concurrent requests, `slope_rounds` times per step `c`, with steps
    added past the endpoint's capacity when it is known (capacity.py)."""
    o = sender.target.options
    asked = tuple(sorted(set(o.slope_steps)))
    # Sent on the run's client, whose timeout (--timeout) is above every statement's.
    known = capacity.advertised(lambda path, _: sender.send(sender.target.get(path)).json())
    plan = past(asked, known)
    # Nothing advertised: watch a running-requests gauge while the steps run.
    url = sender.target.base + "/metrics"
    sampler = capacity.RunningSampler(url) if known is None else None
    with sampler or contextlib.nullcontext():
        steps = _steps(sender, plan)
    if sampler is not None and (found := sampler.discovered) is not None:
        # The top is the capacity only if some step offered more than it.
        largest = max(s.concurrency for s in steps)
        if found.value < largest:
            known = found
            more = past((largest,), found)[1:]
            steps += _steps(sender, more)
            plan += more
    return SlopeRun(steps, known, asked, tuple(c for c in plan if c not in asked))


def _steps(sender: Sender, concurrencies: tuple[int, ...]) -> list[SlopeStep]:
    if not concurrencies:
        return []
    t, o = sender.target, sender.target.options
    req = t.generate(t.api, stream=True, max_tokens=o.slope_max_tokens)
    done = loadclient.bursts(sender, [[[req] * c] * o.slope_rounds for c in concurrencies])
    steps = []
    for c, rounds in zip(concurrencies, done, strict=False):
        flat = [ex for burst in rounds for ex in burst]
        if not flat:
            continue
        span = (max(ex.t_end for ex in flat) - min(ex.t_send for ex in flat)) / 1e9
        steps.append(SlopeStep(c, rounds, span))
    return steps


def past(steps: tuple[int, ...], known: Capacity | None) -> tuple[int, ...]:
    """`steps`, then one more at twice the capacity when none reaches it (at most
    capacity.MAX_CONCURRENCY: a step that wide would exhaust the client's sockets)."""
    if known is None or max(steps) >= 2 * known.value:
        return steps
    extra = min(2 * known.value, capacity.MAX_CONCURRENCY)
    return steps if extra <= max(steps) else (*steps, extra)


def overload(sender: Sender, _: Observations) -> Overload:
    """One burst of `overload_concurrency` requests, then sequential requests until
    `recovery_requests` in a row are admitted (or `recovery_s` passed)."""
    t, o = sender.target, sender.target.options
    req = t.generate(t.api, stream=True, max_tokens=o.overload_max_tokens)
    ((burst,),) = loadclient.bursts(sender, [[[req] * o.overload_concurrency]])
    t_end = time.monotonic()
    small = t.generate(t.api, stream=True, max_tokens=4)
    recovery: list[Evidence] = []
    in_a_row, recovered_at = 0, None
    while time.monotonic() - t_end < o.recovery_s + 1.0 and len(recovery) < 200:
        ex = sender.send(small)
        recovery.append(ex)
        if ex.admission == "admitted":
            if in_a_row == 0:
                recovered_at = time.monotonic() - t_end
            in_a_row += 1
            if in_a_row >= o.recovery_requests:
                break
        else:
            in_a_row, recovered_at = 0, None
            time.sleep(0.02)  # poll, do not hammer a server that says it is full
    if in_a_row < o.recovery_requests:
        recovered_at = None
    return Overload(burst, recovery, recovered_at)


LOAD = ("at_rest", "settle.load")
PLAN: tuple[Phase, ...] = (
    Phase("at_rest", at_rest),
    *(phase for name in DIALECTS for phase in api.phases(name)),  # registry order
    *transport.PHASES,
    *zeroqueue.PHASES,
    Phase("settle.load", settle),
    Phase("slope", slope, LOAD),
    Phase("overload", overload, LOAD),
    Phase("retry", retry.measure, (*LOAD, "slope", "overload")),
    Phase("disconnect", disconnect.measure, (*LOAD, "slope", "overload")),
    Phase("settle.errors", settle),
    *errors.PHASES,  # each after settle.errors
)


def closure(needs: Iterable[str]) -> set[str]:
    """`needs` and every phase they are measured after, transitively."""
    by_name = {p.name: p for p in PLAN}
    out: set[str] = set()
    todo = list(needs)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(by_name[name].after)
    return out


def planned(needs: Iterable[str]) -> list[Phase]:
    """The phases `needs` calls for, in PLAN's order."""
    wanted = closure(needs)
    return [p for p in PLAN if p.name in wanted]


def measure(sender: Sender, plan: list[Phase]) -> tuple[Observations, dict[str, float]]:
    """The observations of `plan`'s phases, and the seconds each took. A phase reads what
    the phases before it observed (`after` names those it cannot do without; a settling
    compares with at_rest only when the plan measured it)."""
    obs = Observations(sender.target)
    seconds: dict[str, float] = {}
    stopped = None
    for phase in plan:
        t = time.monotonic()
        try:
            obs.results[phase.name] = phase.measure(sender, obs)
            stopped = hung.stopped_answering(sender)
        except hung.OutOfTime as out:  # the run's bound passed: this phase is not measured
            stopped = str(out)
        seconds[phase.name] = time.monotonic() - t
        if stopped is not None:
            break  # the rest would each wait out --timeout (conform.hung)
    return Observations(sender.target, obs.results, tuple(sender.seen), stopped), seconds
