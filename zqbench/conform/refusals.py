"""False refusals (zeroqueue.11): refusals the endpoint made while it had a free slot.

A zero-queue endpoint refuses only when it is full. Judged on the exchanges the run already
has, where the client knows what it had in flight:

at rest     the low-load requests, one at a time with nothing else in flight: any refusal
            among them is false.
under load  the slope steps and the overload burst: a refusal is false when fewer of the
            run's admitted requests were in flight across its window than the capacity.

occupancy   the admitted requests whose [send, end + GRACE_S] overlaps the refusal's
            [send, end]: every request that could have held a slot at any moment of the
            refusal's life, counted together. The client's span of a request holds the
            server's (it sends before the server receives, it reads the last byte after the
            server wrote it), and the grace covers a server that frees the slot just after
            writing that byte (capacity.GRACE_S). So occupancy is never below what the
            server held for this client: a refusal called false had a free slot.

The same definitions as `zqbench run`'s false refusals (zqbench.metrics.false_refusals).
Another client's requests are invisible here: conform assumes the endpoint is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zqbench.conform.capacity import GRACE_S
from zqbench.conform.evidence import Evidence

REFUSED = ("refused", "refused_in_stream")


@dataclass(frozen=True, slots=True)
class Judged:
    ex: Evidence
    where: str  # "at rest", "slope step 8", "overload burst"
    occupancy: int  # admitted requests in flight across its window
    false: bool


def occupancy(refusal: Evidence, admitted: Sequence[Evidence], grace_ns: int) -> int:
    """Admitted spans [send, end + grace] overlapping the refusal's [send, end]."""
    a, b = refusal.t_send, refusal.t_end
    return sum(1 for ex in admitted if ex.t_send < b and ex.t_end + grace_ns > a)


def judge(
    groups: Sequence[tuple[str, Sequence[Evidence]]],
    capacity: int | None,
    *,
    at_rest: str = "at rest",
) -> list[Judged]:
    """Every refusal of every group, in order; the group named `at_rest` is the endpoint
    at rest (any refusal false), the others are judged by occupancy against `capacity`
    (None: not judged, so never called false)."""
    admitted = [ex for _, exs in groups for ex in exs if ex.outcome == "admitted" and ex.t_end]
    grace_ns = int(GRACE_S * 1e9)
    out = []
    for where, exchanges in groups:
        for ex in exchanges:
            if ex.outcome not in REFUSED:
                continue
            occ = occupancy(ex, admitted, grace_ns)
            false = where == at_rest or (capacity is not None and occ < capacity)
            out.append(Judged(ex, where, occ, false))
    return out
