"""False refusals (zeroqueue.11): refusals the endpoint made while it had a free slot.

A zero-queue endpoint refuses only when it is full. Judged on the exchanges the run already
has, where the client knows what it had in flight:

at rest     the low-load requests, one at a time with nothing else in flight: any refusal
            among them is false.
under load  the slope steps and the overload burst: a refusal is false when fewer of the
            run's admitted requests were in flight across its window than the capacity.

occupancy   `zqbench run`'s (zqbench.metrics.false_refusals.overlapping, with its grace,
            the outcomes' margin): the admitted requests whose [send, end + grace] overlaps
            the refusal's [send, end], so never below what the server held for this client.

Another client's requests are invisible here: conform assumes the endpoint is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zqbench.conform.evidence import Evidence
from zqbench.metrics.classify import DEFAULT_MARGIN_S
from zqbench.metrics.false_refusals import overlapping

REFUSED = ("refused", "refused_in_stream")


@dataclass(frozen=True, slots=True)
class Judged:
    ex: Evidence
    where: str  # "at rest", "slope step 8", "overload burst"
    occupancy: int  # admitted requests in flight across its window
    false: bool


def _spans(exchanges: Sequence[Evidence]) -> tuple[np.ndarray, np.ndarray]:
    """(send, end) of each exchange, integer ns: the clock's own, never rounded."""
    send = np.array([ex.t_send for ex in exchanges], dtype=np.int64)
    return send, np.array([ex.t_end for ex in exchanges], dtype=np.int64)


def judge(
    groups: Sequence[tuple[str, Sequence[Evidence]]],
    capacity: int | None,
    *,
    at_rest: str = "at rest",
) -> list[Judged]:
    """Every refusal of every group, in order; the group named `at_rest` is the endpoint
    at rest (any refusal false), the others are judged by occupancy against `capacity`
    (None: not judged, so never called false)."""
    admitted = [ex for _, exs in groups for ex in exs if ex.admission == "admitted" and ex.t_end]
    refused = [(where, ex) for where, exs in groups for ex in exs if ex.admission in REFUSED]
    occupancy = overlapping(
        *_spans([ex for _, ex in refused]), *_spans(admitted), round(DEFAULT_MARGIN_S * 1e9)
    )
    return [
        Judged(ex, where, int(occ), where == at_rest or (capacity is not None and occ < capacity))
        for (where, ex), occ in zip(refused, occupancy.tolist(), strict=True)
    ]
