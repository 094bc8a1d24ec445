"""Executors: when each request goes. One module per executor, registered here by its
`[load] executor` name; `executor.py` is the protocol every one of them follows.

    constant_arrival_rate, ramping_arrival_rate   open loop (arrival_rate.py, arrival_schedule.py)
    constant_vus, ramping_vus                     closed loop (vus.py, vu_schedule.py)
    trace                                         a trace file's rows at its times (trace_file.py)
    sessions                                      conversations: turns after answers

    parse_load(table, folder) -> LoadSpec       the [load] table, checked key by key
    LoadSpec.plan(workers, seed)         -> LoadPlan: one Work per worker, the stage spans
    work_from_wire(data)                 a distributed worker's Work from its wire form

Nothing here sends a request or knows what one asks: the engine runs each Work's loop and
the request source (`zqbench.sources`) fills each slot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zqbench.errors import ScenarioError
from zqbench.load import (
    constant_arrival_rate,
    constant_vus,
    ramping_arrival_rate,
    ramping_vus,
    sessions,
    trace,
)
from zqbench.load.arrival_rate import ArrivalWork
from zqbench.load.executor import Executor, LoadPlan, LoadSpec, Slot, Stage, Work
from zqbench.load.sessions import SessionsLoad, SessionWork
from zqbench.load.trace import TraceLoad, TraceWork
from zqbench.load.vus import VuWork
from zqbench.strict_toml import Table

EXECUTORS: dict[str, Executor] = {
    e.name: e
    for e in (
        constant_arrival_rate.EXECUTOR,
        ramping_arrival_rate.EXECUTOR,
        constant_vus.EXECUTOR,
        ramping_vus.EXECUTOR,
        trace.EXECUTOR,
        sessions.EXECUTOR,
    )
}
WORK_TYPES: dict[str, Any] = {w.wire_name: w for w in (ArrivalWork, VuWork, TraceWork, SessionWork)}
# Every key some executor takes: a typo among them gets a "did you mean" hint.
LOAD_KEYS = ("executor", *sorted({k for e in EXECUTORS.values() for k in e.keys}))


def parse_load(t: Table, folder: Path) -> LoadSpec:
    """The `[load]` table as its executor's LoadSpec; ScenarioError naming the key. Paths in
    it are read from `folder`, the scenario file's."""
    names = tuple(EXECUTORS)
    t.require("executor", why=f" (one of {', '.join(names)})")
    t.choice("executor", names)  # raises unless it is one of them
    executor = EXECUTORS[t.data["executor"]]
    for key in t.data:
        if key != "executor" and key not in executor.keys:
            raise ScenarioError(
                f"{t.label}: {t.key(key)} is not used by executor {executor.name} "
                f"(it takes {', '.join(executor.keys)})"
            )
    t.require(
        *executor.required, why=f" (executor {executor.name} needs {', '.join(executor.required)})"
    )
    return executor.parse(t, folder)


def work_to_wire(work: Work) -> dict[str, Any]:
    return {"work": work.wire_name, **work.to_wire()}


def work_from_wire(data: dict[str, Any]) -> Work:
    kind = WORK_TYPES.get(data.get("work", ""))
    if kind is None:
        raise ValueError(f"unknown work {data.get('work')!r}")
    work: Work = kind.from_wire(data)
    return work


__all__ = [
    "EXECUTORS",
    "LOAD_KEYS",
    "Executor",
    "LoadPlan",
    "LoadSpec",
    "SessionsLoad",
    "Slot",
    "Stage",
    "TraceLoad",
    "Work",
    "parse_load",
    "work_from_wire",
    "work_to_wire",
]
