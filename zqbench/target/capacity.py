"""The capacity a target states: how many requests it computes at once, from GET /health,
else GET /props (llama.cpp's server: `total_slots`).

The reference server says `slots`; other servers use one of the other CAPACITY_FIELDS.
A positive integer is taken as stated; anything else is no statement (the run then judges
by the target's running gauge or its own requests: zqbench.metrics.false_refusals).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zqbench.summary import Capacity

CAPACITY_FIELDS = ("capacity", "max_concurrency", "max_num_seqs", "slots")  # in /health
PROPS_PATH = "/props"
PROPS_FIELDS = ("total_slots",)  # llama.cpp's server: its --parallel slots


def stated(
    doc: Mapping[str, Any] | None,
    where: str = "/health",
    fields: tuple[str, ...] = CAPACITY_FIELDS,
) -> Capacity | None:
    """The capacity a JSON object (`where` it came from) states, if any."""
    if not isinstance(doc, Mapping):
        return None
    for name in fields:
        value = doc.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return Capacity(value=value, source="stated", detail=f"{where} `{name}`")
    return None


def stated_by_props(props: Mapping[str, Any] | None) -> Capacity | None:
    """The capacity GET /props states (llama.cpp's `total_slots`), if any."""
    return stated(props, PROPS_PATH, PROPS_FIELDS)
