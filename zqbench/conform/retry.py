"""Retry-After, taken at its word (zeroqueue.12): a burst past capacity, then a few of its
refusals retried exactly when their Retry-After (or retry-after-ms) said.

A burst of its own, not the overload burst's (phases.overload): that burst's refusals are
answered before its recovery requests run, and a retry due 1 s later would land among them,
each measurement taking a slot from the other. Here nothing else is in flight: a retry meets
the endpoint with what the burst left running, and that is what its Retry-After described.

sample     the first `size` refusals that carried a Retry-After, size = the capacity (so the
           retries, due at about the same moment, fit in the slots together), 1 when it is
           unknown, and at most MAX_SAMPLE.
a retry    the same request, sent at the refusal's end + its Retry-After; refused again with
           a Retry-After, sent again at that one's end + its value, up to MAX_ATTEMPTS in
           all and until `time_s` after the burst (a wait past that is not taken).
honoured   the first retry was admitted. The rest report the time from the refusal's end to
           the retry that was admitted, if any.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING

from zqbench.conform import loadclient
from zqbench.conform.evidence import Evidence, Request
from zqbench.dialects.common import parse_retry_after
from zqbench.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from zqbench.conform.context import Sender
    from zqbench.conform.observations import Observations

MAX_SAMPLE = 8  # refusals retried: enough to tell a rule from an accident, few requests
MAX_ATTEMPTS = 5  # retries of one refusal


@dataclass(slots=True)
class Retried:
    refusal: Evidence
    retry_after_s: float  # what the refusal said
    attempts: list[Evidence] = field(default_factory=list)  # each retry, in order
    due: list[int] = field(default_factory=list)  # when each was due (perf_counter_ns)
    gave_up: str | None = None  # why no further retry was sent, when none was admitted

    @property
    def honoured(self) -> bool:
        return bool(self.attempts) and self.attempts[0].admission == "admitted"

    @property
    def admitted_after_s(self) -> float | None:
        """Seconds from the refusal's end to the send of the retry that was admitted."""
        for ex in self.attempts:
            if ex.admission == "admitted":
                return (ex.t_send - self.refusal.t_end) / 1e9
        return None

    def row(self) -> dict[str, object]:
        late = [
            round((ex.t_send - due) / 1e6, 3)
            for ex, due in zip(self.attempts, self.due, strict=True)
        ]
        after = self.admitted_after_s
        return {
            "retry_after_s": self.retry_after_s,
            "attempts": [ex.status or ex.error for ex in self.attempts],
            "sent_late_ms": late,  # how far past its due time each retry left the client
            "admitted_after_s": None if after is None else round(after, 3),
            "gave_up": self.gave_up,
        }


@dataclass(frozen=True, slots=True)
class RetryRun:
    burst: list[Evidence]
    sample: list[Retried]
    size: int  # the most refusals it would retry
    with_retry_after: int  # refusals of the burst that carried a parseable Retry-After
    error: str | None = None  # the burst could not start (no connection)

    @property
    def exchanges(self) -> list[Evidence]:
        return [*self.burst, *(ex for r in self.sample for ex in r.attempts)]


async def _retry(
    transport: Transport, req: Request, r: Retried, timeout_s: float, deadline: int
) -> None:
    last, wait_s = r.refusal, r.retry_after_s
    while len(r.attempts) < MAX_ATTEMPTS:
        due = last.t_end + int(wait_s * 1e9)
        if due > deadline:
            r.gave_up = f"Retry-After {wait_s:g} s would pass the check's time"
            return
        await asyncio.sleep(max(0.0, (due - perf_counter_ns()) / 1e9))
        last = await loadclient.send(transport, req, timeout_s)
        r.attempts.append(last)
        r.due.append(due)
        if last.admission == "admitted":
            return
        again = parse_retry_after(last.headers) if last.admission == "refused" else None
        if again is None:
            r.gave_up = f"retry answered {last.status or last.error} without a Retry-After"
            return
        wait_s = again
    r.gave_up = f"{MAX_ATTEMPTS} retries, none admitted"


def measure(sender: Sender, obs: Observations) -> RetryRun:
    """The retry phase: one burst of `overload_concurrency` requests like overload's, and its
    first `size` refusals with a Retry-After retried as the docstring says, all within about
    `check_time_s`."""
    t, o = sender.target, sender.target.options
    known = obs.capacity()
    size = min(known.value if known else 1, MAX_SAMPLE)
    req = t.generate(t.api, stream=True, max_tokens=o.overload_max_tokens)

    async def main() -> RetryRun:
        sample: list[Retried] = []
        counted = [0]  # refusals with a Retry-After

        async with loadclient.pool(t.base, o.overload_concurrency) as transport:
            deadline = perf_counter_ns() + int(o.check_time_s * 1e9)

            async def one() -> Evidence:
                ex = await loadclient.send(transport, req, o.timeout_s)
                wait_s = parse_retry_after(ex.headers) if ex.admission == "refused" else None
                if wait_s is None:
                    return ex
                counted[0] += 1
                if len(sample) < size:
                    r = Retried(ex, wait_s)
                    sample.append(r)
                    await _retry(transport, req, r, o.timeout_s, deadline)
                return ex

            burst = list(await asyncio.gather(*(one() for _ in range(o.overload_concurrency))))
        return RetryRun(burst, sample, size, counted[0])

    try:
        run = asyncio.run(main())
    except TransportError as exc:
        run = RetryRun([], [], size, 0, error=f"{exc.error_class}: {exc}")
    sender.record(run.exchanges)
    return run
