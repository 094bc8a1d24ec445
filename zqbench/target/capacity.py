"""The capacity a target states: how many requests it computes at once, from GET /health.

The reference server says `slots`; other servers use one of the other CAPACITY_FIELDS.
A positive integer is taken as stated; anything else is no statement (the run then judges
by the target's running gauge or its own requests: zqbench.metrics.false_refusals).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zqbench.summary import Capacity

CAPACITY_FIELDS = ("capacity", "max_concurrency", "max_num_seqs", "slots")


def stated(health: Mapping[str, Any] | None) -> Capacity | None:
    """The capacity a /health JSON object states, if any."""
    if not isinstance(health, Mapping):
        return None
    for name in CAPACITY_FIELDS:
        value = health.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return Capacity(value=value, source="stated", detail=f"/health `{name}`")
    return None
