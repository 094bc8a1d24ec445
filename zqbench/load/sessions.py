"""`executor = "sessions"`: conversations of `turns` requests, each turn after the last
one's answer and a think time. Its `[load]` keys, with an example, are in
docs/workloads.md#multi-turn-sessions.

A session's turn k goes when turn k-1's response has ended and its think time passed: the
request source (`zqbench.sources.sessions`) sends the whole conversation so far, the
server's own answers included. With `rate`, session starts are an open-loop schedule (the
arrival-rate executors' process), and turn 0's intended time is its start; later turns
wait for answers, so they have none (closed loop). With `users`, each user starts its next
session when the last one ends. No session starts after `duration`; one still running
may finish within `graceful_stop` (k6's), after which its unsent turns are never sent.

Request ids are `session * turns + turn`, so ids stay unique across workers; workers take
sessions (or users) round-robin. Think times are drawn from the run's seed per session,
so they do not depend on timing or on the number of workers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from zqbench.errors import OptionError, ScenarioError
from zqbench.load.arrival_rate import ARRIVALS, check_planned, constant
from zqbench.load.arrival_schedule import arrival_times
from zqbench.load.executor import (
    Driver,
    Executor,
    LoadPlan,
    Slot,
    Stage,
    WireFields,
    check_users,
    graceful_stop,
    scheduled_missing,
    stage_spans,
)
from zqbench.strict_toml import Table

THINK = ("fixed", "exponential")
_THINK_STREAM = 5  # SeedSequence spawn key: apart from the sources' streams (1-4)
MAX_TURNS = 10_000


@dataclass(frozen=True, slots=True)
class SessionsLoad:
    rate: float | None  # sessions per second; None: `users`
    users: int | None
    duration_s: float
    turns: int
    think_time_s: float
    think: str  # fixed | exponential
    arrivals: str  # rate only
    graceful_stop_s: float
    executor: str = "sessions"

    @property
    def stages(self) -> tuple[Stage, ...]:
        target = self.rate if self.rate is not None else float(self.users or 0)
        return (Stage(self.duration_s, target, "sessions"),)

    def plan(self, n_workers: int, seed: int) -> LoadPlan:
        self._check_size()
        end = round(self.duration_s * 1e9)
        common: dict[str, Any] = {"turns": self.turns, "think_ns": round(self.think_time_s * 1e9)}
        common |= {"think": self.think, "seed": seed, "until_ns": end}
        works: list[Any]
        if self.rate is not None:
            # Session starts: the arrival-rate executors' schedule at `rate`.
            load = constant(self.rate, self.duration_s, None, self.arrivals)
            schedule = arrival_times(load, seed)
            starts, ids = schedule.times_ns, schedule.request_ids
            works = [
                SessionWork(starts_ns=starts[w::n_workers], sessions=ids[w::n_workers], **common)
                for w in range(n_workers)
            ]
            offered = len(ids) * self.turns
        else:
            users = self.users or 0
            works = [
                SessionWork(users=np.arange(w, users, n_workers), n_users=users, **common)
                for w in range(n_workers)
            ]
            offered = 0
        return LoadPlan(
            works=works,
            offered=offered,
            offered_rate=offered / self.duration_s if offered else 0.0,
            stages=stage_spans(self.stages, [(0, end)], rates=self.rate is not None),
            loop="open" if self.rate is not None else "closed",
        )

    def _check_size(self) -> None:
        """The users, or the requests the sessions ask for, bounded before allocation."""
        if self.users is not None:
            check_users("session users", self.users)
            return
        check_planned((self.rate or 0.0) * self.duration_s * self.turns, "rate x duration x turns")

    def scaled(self, rate_scale: float, duration_scale: float, label: str) -> SessionsLoad:
        if self.users is not None:
            check_users("session users", self.users * rate_scale)  # before round(inf)
        users = None if self.users is None else round(self.users * rate_scale)
        if users is not None and users < 1:
            raise OptionError(
                "rate_scale",
                f"leaves {label} with {self.users} x {rate_scale} < 1 user",
                value=str(rate_scale),
            )
        return dataclasses.replace(
            self,
            rate=None if self.rate is None else self.rate * rate_scale,
            users=users,
            duration_s=self.duration_s * duration_scale,
        )

    def with_arrivals(self, arrivals: str | None, burstiness: float | None) -> SessionsLoad:
        if burstiness is not None:
            raise OptionError("burstiness", "does not apply to sessions (uniform or poisson)")
        if arrivals is None:
            return self
        if self.rate is None:
            raise OptionError("arrivals", "applies to sessions started at a rate, not to users")
        if arrivals not in ("uniform", "poisson"):
            raise OptionError("arrivals", "is not one of uniform, poisson", value=arrivals)
        return dataclasses.replace(self, arrivals=arrivals)

    def at_constant_rate(self, rate: float, duration_s: float, name: str) -> SessionsLoad:
        raise OptionError(
            "scenario",
            "runs sessions; a sweep needs an arrival-rate or vus executor "
            "(use --rate-scale to start sessions faster)",
        )

    def concurrency_guess(self) -> int:
        if self.users is not None:
            return self.users
        # Sessions alive at once: the rate times a guessed session length (turns x (think
        # + 100 ms)), by Little's law.
        length = self.turns * (self.think_time_s + 0.1)
        return int((self.rate or 0) * length * 0.5) + 4


@dataclass(frozen=True, slots=True)
class SessionWork(WireFields):
    """One worker's sessions: scheduled starts (rate), or users running sessions."""

    wire_name: ClassVar[str] = "sessions"
    wire_arrays: ClassVar[dict[str, str]] = dict.fromkeys(
        ("starts_ns", "sessions", "users"), "int64"
    )

    turns: int
    think_ns: int
    think: str
    seed: int
    until_ns: int  # no session starts after it (ns from t = 0)
    starts_ns: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    sessions: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    users: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    n_users: int = 0

    def _thinks(self, session: int) -> list[int]:
        """The think time (ns) after each turn of `session`, from the run's seed."""
        if self.think == "fixed" or self.think_ns == 0:
            return [self.think_ns] * self.turns
        rng = np.random.default_rng(
            np.random.SeedSequence(self.seed, spawn_key=(_THINK_STREAM, session))
        )
        draws = rng.exponential(self.think_ns, size=self.turns)
        return [int(x) for x in draws.tolist()]

    async def _session(self, driver: Driver, session: int, start_abs: int | None) -> None:
        """Its turns one after the other: each waits for the last answer and the think."""
        thinks = self._thinks(session)
        for turn in range(self.turns):
            if driver.should_stop():
                return
            slot = Slot(session * self.turns + turn, 0, session=session, turn=turn)
            await driver.send(slot, start_abs if turn == 0 else None)
            if turn + 1 < self.turns and thinks[turn]:
                await asyncio.sleep(thinks[turn] / 1e9)

    async def _user(self, driver: Driver, user: int) -> None:
        k = 0
        while not driver.should_stop():
            if time.perf_counter_ns() - driver.start_ns >= self.until_ns:
                return
            await self._session(driver, user + self.n_users * k, None)
            k += 1

    async def run(self, driver: Driver) -> None:
        if len(self.users):
            for user in self.users.tolist():
                driver.spawn(self._user(driver, user))
            if not await driver.sleep_until(driver.start_ns + self.until_ns):
                driver.stop_early()
            return
        for start, session in zip(self.starts_ns.tolist(), self.sessions.tolist(), strict=True):
            due = driver.start_ns + start
            if not await driver.sleep_until(due):
                driver.stop_early()
                return
            driver.spawn(self._session(driver, session, due))

    def end_ns(self) -> int:
        return self.until_ns

    def assigned(self) -> int | None:
        return len(self.sessions) * self.turns if len(self.starts_ns) else None

    def due(self, elapsed_ns: int) -> int | None:
        return None  # later turns wait for answers: no schedule to be behind

    def missing(self, received_ids: np.ndarray) -> tuple[int, float | None, float | None]:
        if not len(self.starts_ns):
            return 0, None, None
        # Each session's turn 0 was scheduled; later turns wait for answers.
        return scheduled_missing(self.sessions * self.turns, self.starts_ns, received_ids)


def parse(t: Table, folder: Path) -> SessionsLoad:
    has = [k for k in ("rate", "users") if t.has(k)]
    if len(has) != 1:
        problem = "both" if has else "neither"
        raise ScenarioError(
            f"{t.label}: [load] has {problem} of load.rate and load.users; give one (sessions "
            "started per second, or users running sessions back to back)"
        )
    rate = t.number("rate", strict=True) if t.has("rate") else None
    users = t.integer("users", minimum=1) if t.has("users") else None
    turns = t.integer("turns", minimum=1)
    if turns > MAX_TURNS:
        raise t.fail("turns", f"is more than {MAX_TURNS:,} turns a session")
    arrivals = t.choice("arrivals", ARRIVALS[:2], "uniform") or "uniform"
    if users is not None and t.has("arrivals"):
        raise t.fail("arrivals", "applies to sessions started at a rate, not to users")
    think_time = t.duration("think_time") if t.has("think_time") else 0.0
    if not math.isfinite(think_time):
        raise t.fail("think_time", "must be a finite duration")
    return SessionsLoad(
        rate=rate,
        users=users,
        duration_s=t.duration("duration", positive=True),
        turns=turns,
        think_time_s=think_time,
        think=t.choice("think", THINK, "fixed") or "fixed",
        arrivals=arrivals,
        graceful_stop_s=graceful_stop(t),
    )


EXECUTOR = Executor(
    name="sessions",
    keys=("rate", "users", "duration", "turns", "think_time", "think", "arrivals", "graceful_stop"),
    required=("duration", "turns"),
    parse=parse,
)
