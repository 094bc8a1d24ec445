"""The executor protocol: when each request goes, whatever it asks.

An executor is one module of this package, registered under its `[load] executor` name in
`zqbench.load.EXECUTORS`. It owns everything about itself:

    Executor.parse(table, folder)    [load] table -> LoadSpec   (one-line ScenarioErrors)
    LoadSpec.plan(n_workers, seed)   -> LoadPlan: one Work per worker, the stage spans
    Work.run(driver)                 its loop on the engine: driver.dispatch(slot, due)
    Work.to_wire() / WORK_TYPES      its form for distributed workers
    LoadPlan.loop                    its summary metadata ("open" or "closed" loop)

What a request asks is the request source's business (`zqbench.sources`): an executor hands
the engine a `Slot` (the request's id, stage and user), the source turns it into a request.
Nothing outside this package asks which kind of load it is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from zqbench.errors import ScenarioError, UsageError
from zqbench.load.spans import StageInfo
from zqbench.strict_toml import Table, parse_duration, show
from zqbench.summary import Loop

_STAGE_KEYS = ("duration", "target", "name", "mix")
DEFAULT_GRACEFUL_STOP_S = parse_duration("30s")  # k6's default gracefulStop
# Users at once, virtual (vus) or running sessions (users): each is a task with its
# request's buffers, a session's user its conversation too. Measured on 2026-12-06: 100,000
# VUs peaked at 330 MB, 100,000 session users at 470 MB; unbounded, `users = 1e9` took
# 21 GiB before the kernel stopped it. Checked before anything is allocated.
MAX_USERS = 100_000


def check_users(what: str, asked: float) -> None:
    """UsageError (exit 2) when the load asks for more than MAX_USERS users at once."""
    if not math.isfinite(asked) or asked > MAX_USERS:
        raise UsageError(
            f"the load asks for {asked:.3g} {what} at once; a run holds at most "
            f"{MAX_USERS:,}: lower it (or --rate-scale)"
        )


@dataclass(frozen=True, slots=True)
class Stage:
    """Ramp linearly from the previous target (or the start value) to `target` over `duration_s`.

    `target` is requests per second for the arrival-rate executors, virtual users for the
    vus executors (then a whole number).
    """

    duration_s: float
    target: float
    name: str | None = None
    # Names of the request classes this stage draws from (weights renormalised among
    # them); None: the whole mix. Arrival-rate executors only.
    mix: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Slot:
    """One request's place in the load: everything the executor knows about it.

    `user` is the virtual user that sends it (None: an arrival of an open-loop schedule);
    a request source may key its choices on it, so that a user's sequence of requests does
    not depend on how many other users ran."""

    request_id: int  # unique in the run, across workers
    stage: int  # index into the load's stages
    user: int | None = None
    # A conversation's turn (the sessions executor): its session, unique in the run, and
    # the turn's index from 0. None otherwise.
    session: int | None = None
    turn: int | None = None


class Driver(Protocol):
    """What the engine offers a work's run loop (`zqbench.engines.native.NativeWorker`)."""

    start_ns: int  # t = 0 of the run on time.perf_counter_ns()

    def should_stop(self) -> bool: ...

    def stop_early(self) -> None:
        """The load ended before its plan did (a stop was asked for)."""

    async def sleep_until(self, due_abs_ns: int) -> bool:
        """Sleep, then spin to `due_abs_ns`; False if asked to stop meanwhile."""

    async def send(self, slot: Slot, t_intended_abs_ns: int | None) -> None:
        """Send one request and record its sample; returns when its response ended."""

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro` beside the loop (a request that must not hold up the schedule)."""

    def dispatch(self, slot: Slot, due_abs_ns: int) -> None:
        """An open-loop request due now, sent beside the loop: at once, or when a connection
        frees (the wait is its `connection_wait`)."""


class Work(Protocol):
    """One worker's share of the load: picklable, and with a wire form for `--distributed`."""

    wire_name: ClassVar[str]  # its key in WORK_TYPES

    async def run(self, driver: Driver) -> None: ...

    def end_ns(self) -> int:
        """When the share's last request is due (or its users stop), from t = 0."""

    def assigned(self) -> int | None:
        """Requests scheduled for this share; None when not known in advance."""

    def due(self, elapsed_ns: int) -> int | None:
        """Requests due by `elapsed_ns` (the live offered-load counter); None: no schedule."""

    def missing(self, received_ids: np.ndarray) -> tuple[int, float | None, float | None]:
        """Scheduled requests not among `received_ids`: (count, first and last intended
        time in s). (0, None, None) when nothing was scheduled in advance."""

    def to_wire(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class LoadPlan:
    works: list[Work]  # one per worker
    offered: int  # requests scheduled; 0 when not known in advance
    offered_rate: float  # mean req/s of the schedule; 0 when none
    stages: list[StageInfo]
    loop: Loop  # its summary metadata: "open" or "closed"


class LoadSpec(Protocol):
    """One executor's parsed `[load]` table: a frozen dataclass."""

    # Read-only, as a frozen dataclass's fields are.
    @property
    def executor(self) -> str:
        """Its TOML name."""

    @property
    def stages(self) -> tuple[Stage, ...]:
        """Always at least one; a constant executor has one flat stage."""

    @property
    def duration_s(self) -> float:
        """The total of the stages."""

    @property
    def graceful_stop_s(self) -> float:
        """How long in-flight requests may finish after the end."""

    def plan(self, n_workers: int, seed: int) -> LoadPlan: ...

    def scaled(self, rate_scale: float, duration_scale: float, label: str) -> LoadSpec:
        """Every rate (or user count) times `rate_scale`, every stage times
        `duration_scale`; OptionError naming `label` (the scenario) when nothing is left."""

    def with_arrivals(self, arrivals: str | None, burstiness: float | None) -> LoadSpec:
        """The `--arrivals`/`--burstiness` override, or OptionError where it does not apply."""

    def at_constant_rate(self, rate: float, duration_s: float, name: str) -> LoadSpec:
        """One constant-rate stage with this load's arrival process (a sweep's step)."""

    def concurrency_guess(self) -> int:
        """Requests likely in flight at the peak: how many connections to open early."""


@dataclass(frozen=True)
class Executor:
    """One `[load] executor = NAME`: its keys and its parser."""

    name: str
    keys: tuple[str, ...]  # the [load] keys it takes besides `executor`
    required: tuple[str, ...]
    # (table, the scenario file's folder): the table's keys were checked against `keys`
    parse: Callable[[Table, Path], LoadSpec]


W = TypeVar("W", bound="WireFields")


class WireFields:
    """`to_wire` and `from_wire` of a frozen dataclass (a Work, a RequestSource): its fields
    by name, the numpy arrays among them (`wire_arrays`: name -> dtype) as their bytes."""

    __slots__: tuple[str, ...] = ()  # a dataclass(slots=True) names its fields here
    wire_arrays: ClassVar[dict[str, str]] = {}

    def to_wire(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        return data | {k: data[k].astype(t).tobytes() for k, t in self.wire_arrays.items()}

    @classmethod
    def from_wire(cls: type[W], data: dict[str, Any]) -> W:
        arrays = {k: np.frombuffer(data[k], dtype=t).copy() for k, t in cls.wire_arrays.items()}
        return cls(**{name: data[name] for name in cls.__slots__} | arrays)


class ScheduledWork(WireFields):
    """The schedule-keeping part of an open-loop Work (a WireFields dataclass) whose
    `times_ns` field holds its requests' intended times (int64 ns from t = 0, non-decreasing)."""

    __slots__ = ()
    times_ns: np.ndarray

    def end_ns(self) -> int:
        return int(self.times_ns[-1]) if len(self.times_ns) else 0

    def assigned(self) -> int | None:
        return len(self.times_ns)

    def due(self, elapsed_ns: int) -> int | None:
        return int(np.searchsorted(self.times_ns, elapsed_ns, "right"))


def scheduled_missing(
    ids: np.ndarray, times_ns: np.ndarray, received_ids: np.ndarray
) -> tuple[int, float | None, float | None]:
    """`Work.missing` of a schedule: the ids not received, and their first and last
    intended times in s."""
    lost = ~np.isin(ids, received_ids)
    if not lost.any():
        return 0, None, None
    times = times_ns[lost]
    return int(lost.sum()), float(times.min()) / 1e9, float(times.max()) / 1e9


def stage_spans(
    stages: Sequence[Stage], bounds_ns: Sequence[tuple[int, int]], *, rates: bool
) -> list[StageInfo]:
    """Each stage's name and span on the run's clock; with `rates`, its target rate and
    its classes too (an arrival-rate stage's)."""
    return [
        StageInfo(
            stage.name or f"stage {i}",
            a / 1e9,
            b / 1e9,
            stage.target if rates else None,
            stage.mix if rates else None,
        )
        for i, (stage, (a, b)) in enumerate(zip(stages, bounds_ns, strict=True))
    ]


def parse_stages(t: Table, *, vus: bool) -> tuple[Stage, ...]:
    """`stages = [{ duration = "30s", target = N, name = "...", mix = [...] }, ...]`."""
    raw = t.data["stages"]
    if not isinstance(raw, list) or not raw:
        raise t.fail("stages", 'must be a non-empty list of { duration = "30s", target = N }')
    stages = []
    for i, item in enumerate(raw):
        s = Table(t.label, f"{t.prefix}.stages[{i}]", item, _STAGE_KEYS)
        s.require("duration", "target")
        duration = s.duration("duration")
        target = float(s.integer("target", minimum=0)) if vus else s.number("target")
        mix = _stage_mix(s)
        if mix is not None and vus:
            raise ScenarioError(
                f"{t.label}: {s.key('mix')} = {show(list(mix))}: a per-stage mix applies to "
                "arrival-rate executors only"
            )
        stages.append(Stage(duration, target, s.string("name"), mix))
    if sum(st.duration_s for st in stages) <= 0:
        raise ScenarioError(f"{t.label}: {t.key('stages')} last 0s in total; the run needs time")
    return tuple(stages)


def graceful_stop(t: Table) -> float:
    return t.duration("graceful_stop") if t.has("graceful_stop") else DEFAULT_GRACEFUL_STOP_S


def _stage_mix(s: Table) -> tuple[str, ...] | None:
    """A stage's `mix = ["short", ...]`: the names only; the scenario checks them against
    its request classes."""
    if not s.has("mix"):
        return None
    raw = s.data["mix"]
    if not (isinstance(raw, list) and raw and all(isinstance(x, str) and x for x in raw)):
        raise s.fail("mix", 'must be a non-empty list of request class names, e.g. ["short"]')
    if len(set(raw)) != len(raw):
        raise s.fail("mix", "names a class twice")
    return tuple(raw)


def scaled_stages(
    stages: tuple[Stage, ...], target: Callable[[float], float], duration_scale: float
) -> tuple[Stage, ...]:
    return tuple(
        dataclasses.replace(st, duration_s=st.duration_s * duration_scale, target=target(st.target))
        for st in stages
    )
