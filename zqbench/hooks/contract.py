"""Things that run beside the load: network impairment, telemetry samplers, ...

A hook is started once the schedule's t = 0 is fixed and stopped when the load ends,
always: on success, on error, on Ctrl-C and on SIGTERM (`run_scenario` stops hooks in a
`finally`). Hooks run in the main process, on their own threads when they need time-based
work (a stage boundary, a 10 Hz sampler); they never touch the engine's event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from zqbench.load.spans import StageInfo
from zqbench.summary import ServerQueue, Unavailable


@dataclass(frozen=True, slots=True)
class HookContext:
    run_name: str  # unique per run: output folder name; hooks label what they create with it
    out_dir: Path
    base_url: str  # the target, without credentials
    host: str
    port: int
    start_monotonic_ns: int  # t = 0 of every t_* column, on time.perf_counter_ns()
    stages: Sequence[StageInfo]


@dataclass(slots=True)
class HookResult:
    """What a hook adds to the run's summary."""

    telemetry: dict[str, float] = field(default_factory=dict)  # e.g. {"gpu_density": 0.93}
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # shown to the user, e.g. "GPU throttled"
    # The server's queue from its own metrics, or why a looked-for source gave none.
    server_queue: ServerQueue | Unavailable | None = None


class RunHook(Protocol):
    name: str

    def start(self, ctx: HookContext) -> None:
        """Begin; return quickly (start a thread for anything that takes time)."""

    def stop(self) -> HookResult:
        """Undo everything `start` did, and report. Must be safe to call after a failed start."""
