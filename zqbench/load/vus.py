"""Closed loop: virtual users, each sending a request, waiting for its whole answer, then
thinking, their number following a VU plan (`vu_schedule.py`).

The two vus executors (`constant_vus.py`, `ramping_vus.py`) parse into one `VuLoad`. Every
worker gets the whole plan and runs its share of the users: worker w runs the global VU
indices i with i % n_workers == w.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, ClassVar

import numpy as np

from zqbench.errors import OptionError
from zqbench.load.arrival_rate import ArrivalRateLoad, constant
from zqbench.load.executor import (
    Driver,
    LoadPlan,
    Slot,
    Stage,
    check_users,
    graceful_stop,
    scaled_stages,
    stage_spans,
)
from zqbench.load.vu_schedule import VuPlan, vu_plan
from zqbench.strict_toml import Table

KEYS = ("think_time", "graceful_stop")  # besides each executor's own
POLL_NS = 10_000_000  # how often the user count is brought to the plan's target


@dataclass(frozen=True, slots=True)
class VuLoad:
    executor: str  # constant-vus or ramping-vus
    start_vus: int  # VUs at t = 0
    stages: tuple[Stage, ...]  # targets are whole VU counts; constant-vus is one flat stage
    think_time_s: float  # sleep after each request; 0: back to back
    duration_s: float
    graceful_stop_s: float

    def plan(self, n_workers: int, seed: int) -> LoadPlan:
        check_users("virtual users", self.most_users())
        plan = vu_plan(self)
        works: list[Any] = [VuWork(plan, w, n_workers) for w in range(n_workers)]
        return LoadPlan(
            works=works,
            offered=0,
            offered_rate=0.0,
            stages=stage_spans(self.stages, list(pairwise(plan.bounds_ns)), rates=False),
            loop="closed",
        )

    def most_users(self) -> float:
        return max(self.start_vus, *(s.target for s in self.stages))

    def scaled(self, rate_scale: float, duration_scale: float, label: str) -> VuLoad:
        check_users("virtual users", self.most_users() * rate_scale)  # before round(inf)
        stages = scaled_stages(self.stages, lambda x: float(round(x * rate_scale)), duration_scale)
        if self.executor == "constant-vus" and stages[0].target < 1:
            raise OptionError(
                "rate_scale",
                f"leaves {label} with {int(self.stages[0].target)} x {rate_scale} < 1 virtual user",
                value=str(rate_scale),
            )
        return dataclasses.replace(
            self,
            stages=stages,
            duration_s=sum(s.duration_s for s in stages),
            start_vus=round(self.start_vus * rate_scale),
        )

    def with_arrivals(self, arrivals: str | None, burstiness: float | None) -> VuLoad:
        raise OptionError("arrivals", f"applies to arrival-rate executors, not {self.executor}")

    def at_constant_rate(self, rate: float, duration_s: float, name: str) -> ArrivalRateLoad:
        return constant(rate, duration_s, name, graceful_stop_s=self.graceful_stop_s)

    def concurrency_guess(self) -> int:
        return max([self.start_vus, *[int(s.target) for s in self.stages]])


def parse_vus(t: Table, executor: str, start_vus: int, stages: tuple[Stage, ...]) -> VuLoad:
    """The keys both vus executors take, around the users each parsed."""
    return VuLoad(
        executor=executor,
        start_vus=start_vus,
        stages=stages,
        think_time_s=t.duration("think_time") if t.has("think_time") else 0.0,
        duration_s=sum(s.duration_s for s in stages),
        graceful_stop_s=graceful_stop(t),
    )


@dataclass(frozen=True, slots=True)
class VuWork:
    """The whole VU plan, and which of its users this worker runs."""

    wire_name: ClassVar[str] = "vus"

    plan: VuPlan
    worker: int
    n_workers: int

    async def _user(self, driver: Driver, vu: int, running: dict[int, bool]) -> None:
        plan = self.plan
        seq = 0
        try:
            while running.get(vu, False) and not driver.should_stop():
                t = time.perf_counter_ns() - driver.start_ns
                if t >= plan.duration_ns:
                    break
                # Unique global id: VU-major, so ids never collide across workers and VUs.
                request_id = (vu << 32) | seq
                seq += 1
                await driver.send(Slot(request_id, plan.stage_at(t), user=vu), None)
                if plan.think_time_ns:
                    await asyncio.sleep(plan.think_time_ns / 1e9)
        finally:
            running.pop(vu, None)

    async def run(self, driver: Driver) -> None:
        running: dict[int, bool] = {}
        while True:
            t = time.perf_counter_ns() - driver.start_ns
            if t >= self.plan.duration_ns or driver.should_stop():
                if t < self.plan.duration_ns:
                    driver.stop_early()
                break
            wanted = set(range(self.worker, self.plan.target_at(t), self.n_workers))
            for vu in sorted(wanted - running.keys()):
                running[vu] = True
                driver.spawn(self._user(driver, vu, running))
                # One user's first send a loop iteration: spawned all at once, 250 users sent
                # for 30 ms with no read in between, and their streams' first tokens waited
                # in the sockets (#43). Each iteration now polls the sockets first.
                await asyncio.sleep(0)
            for vu in list(running):
                if vu not in wanted:
                    running[vu] = False  # finishes its current request, then stops
            await asyncio.sleep(POLL_NS / 1e9)
        for vu in list(running):
            running[vu] = False

    def end_ns(self) -> int:
        return self.plan.duration_ns

    def assigned(self) -> int | None:
        return None

    def due(self, elapsed_ns: int) -> int | None:
        return None

    def missing(self, received_ids: np.ndarray) -> tuple[int, float | None, float | None]:
        return 0, None, None

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> VuWork:
        plan: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data["plan"].items()
        }
        return cls(VuPlan(**plan), data["worker"], data["n_workers"])
