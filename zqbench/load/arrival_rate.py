"""Open loop: requests at intended times drawn up front, whatever the server does.

The two arrival-rate executors (`constant_arrival_rate.py`, `ramping_arrival_rate.py`)
parse into one `ArrivalRateLoad`: a piecewise-linear rate curve and an arrival process
(`arrival_schedule.py`). Its plan deals the arrivals round-robin to the workers; each
worker's `ArrivalWork` sleeps until shortly before each intended time, then yields in a
tight loop for the last stretch (the event loop's timers only resolve to 1 ms). A request
that goes out late keeps its intended time, so `latency_corrected` charges the lateness
to the run (coordinated omission), and `schedule_lag` shows whether the generator held.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from zqbench.errors import OptionError, UsageError
from zqbench.load.arrival_schedule import arrival_times
from zqbench.load.executor import (
    Driver,
    LoadPlan,
    ScheduledWork,
    Slot,
    Stage,
    graceful_stop,
    scaled_stages,
    scheduled_missing,
    stage_spans,
)
from zqbench.strict_toml import Table

ARRIVALS = ("uniform", "poisson", "gamma")
KEYS = ("arrivals", "burstiness", "graceful_stop")  # besides each executor's own
YIELD_EVERY = 32  # when behind schedule, still let responses be read between sends
# The requests one run plans: each is a row of samples.parquet, and the analysis holds what
# it derives of every row in memory at once (its exact percentiles need all of them), about
# 400 bytes a row at its peak: 3,600,000 rows (an hour at 1,000 req/s, six minutes at
# 10,000) stay under 2 GiB (docs/performance.md). The 20,000,000 accepted before would need
# about 8 GB; a typo (rate = 5e8) is one clear line, never an allocation.
MAX_PLANNED_REQUESTS = 3_600_000


def too_many(bound: int) -> str:
    """What a load past the bound is told, before how to fix it."""
    return f"a run plans at most {bound:,} (its analysis holds every request's row in memory): "


def check_planned(asked: float, how: str) -> None:
    """UsageError (exit 2) before any allocation or traffic unless the load asks for at
    least one request and at most MAX_PLANNED_REQUESTS (`how` says how they were counted)."""
    options = "the rate or the duration (or --rate-scale, --duration-scale)"
    if not math.isfinite(asked) or asked > MAX_PLANNED_REQUESTS:
        split = "split the load into several runs"
        fix = f"{too_many(MAX_PLANNED_REQUESTS)}lower {options}, or {split}"
    elif asked < 1:
        fix = f"a run plans at least one: raise {options}"  # a run that sends nothing
    else:
        return
    # In full near the bound (3,600,001, not 3.6e+06), else as 5e+15, inf or 1e-300.
    shown = f"{math.ceil(asked):,}" if 1 <= asked < 1e15 else f"{asked:.3g}"
    raise UsageError(f"the load asks for {shown} requests ({how}); {fix}")


@dataclass(frozen=True, slots=True)
class ArrivalRateLoad:
    executor: str  # constant-arrival-rate or ramping-arrival-rate
    start_rate: float  # req/s at t = 0
    stages: tuple[Stage, ...]  # a constant rate is one flat stage
    arrivals: str  # uniform | poisson | gamma
    burstiness: float | None  # gamma only: the gamma shape (1 = Poisson, < 1 burstier)
    duration_s: float
    graceful_stop_s: float

    def plan(self, n_workers: int, seed: int) -> LoadPlan:
        self._check_size()
        schedule = arrival_times(self, seed)
        works: list[Any] = [
            ArrivalWork(request_ids=part.request_ids, times_ns=part.times_ns, stages=part.stage)
            for part in schedule.split(n_workers)
        ]
        duration_s = schedule.duration_ns / 1e9
        return LoadPlan(
            works=works,
            offered=schedule.offered,
            offered_rate=schedule.offered / duration_s if duration_s else 0.0,
            stages=stage_spans(self.stages, schedule.stage_bounds_ns, rates=True),
            loop="open",
        )

    def _check_size(self) -> None:
        """The requests the rate curve asks for, bounded before anything is allocated."""
        rate, asked = self.start_rate, 0.0
        for stage in self.stages:  # Python floats: an overflow is inf, not an exception
            asked += 0.5 * (rate + stage.target) * stage.duration_s
            rate = stage.target
        check_planned(asked, "rate x duration")

    def scaled(self, rate_scale: float, duration_scale: float, label: str) -> ArrivalRateLoad:
        stages = scaled_stages(self.stages, lambda x: x * rate_scale, duration_scale)
        return dataclasses.replace(
            self,
            stages=stages,
            duration_s=sum(s.duration_s for s in stages),
            start_rate=self.start_rate * rate_scale,
        )

    def with_arrivals(self, arrivals: str | None, burstiness: float | None) -> ArrivalRateLoad:
        arr = arrivals if arrivals is not None else self.arrivals
        if arr not in ARRIVALS:
            raise OptionError("arrivals", f"is not one of {', '.join(ARRIVALS)}", value=arr)
        burst = burstiness if burstiness is not None else self.burstiness
        if arr == "gamma":
            if burst is None or not (math.isfinite(burst) and burst > 0):
                raise OptionError("burstiness", "must be > 0 with gamma arrivals")
        else:
            if burstiness is not None:
                raise OptionError("burstiness", "applies only to gamma arrivals")
            burst = None
        return dataclasses.replace(self, arrivals=arr, burstiness=burst)

    def at_constant_rate(self, rate: float, duration_s: float, name: str) -> ArrivalRateLoad:
        return constant(
            rate, duration_s, name, self.arrivals, self.burstiness, self.graceful_stop_s
        )

    def concurrency_guess(self) -> int:
        peak = max([self.start_rate, *[s.target for s in self.stages]])
        # Little's law with a guessed 100 ms latency: enough for the first second.
        return int(peak * 0.1) + 4


def constant(
    rate: float,
    duration_s: float,
    name: str | None,
    arrivals: str = "uniform",
    burstiness: float | None = None,
    graceful_stop_s: float = 30.0,
) -> ArrivalRateLoad:
    """A constant-arrival-rate load of one flat stage."""
    return ArrivalRateLoad(
        executor="constant-arrival-rate",
        start_rate=rate,
        stages=(Stage(duration_s, rate, name),),
        arrivals=arrivals,
        burstiness=burstiness if arrivals == "gamma" else None,
        duration_s=duration_s,
        graceful_stop_s=graceful_stop_s,
    )


def parse_arrivals(
    t: Table, executor: str, start_rate: float, stages: tuple[Stage, ...]
) -> ArrivalRateLoad:
    """The keys both arrival-rate executors take, around the rate curve each parsed."""
    arrivals = t.choice("arrivals", ARRIVALS, "uniform") or "uniform"
    burstiness = None
    if arrivals == "gamma":
        t.require(
            "burstiness",
            why=' (arrivals = "gamma" needs it: the gamma shape, 1 = Poisson, < 1 burstier)',
        )
        burstiness = t.number("burstiness", strict=True)
    elif t.has("burstiness"):
        raise t.fail("burstiness", 'applies only to arrivals = "gamma"')
    return ArrivalRateLoad(
        executor=executor,
        start_rate=start_rate,
        stages=stages,
        arrivals=arrivals,
        burstiness=burstiness,
        duration_s=sum(s.duration_s for s in stages),
        graceful_stop_s=graceful_stop(t),
    )


Chunk = tuple[list[int], list[int], list[int]]  # intended times (ns from t = 0), ids, stages
CHUNK = 65_536  # arrivals turned into Python ints at a time: a long schedule stays arrays


async def send_open_loop(driver: Driver, chunks: Iterator[Chunk]) -> None:
    """Send each arrival at its intended time, whatever the server does."""
    start = driver.start_ns
    burst = 0
    for times, ids, stages in chunks:
        for i, t in enumerate(times):
            due = start + t
            if due > time.perf_counter_ns():
                burst = 0
                if not await driver.sleep_until(due):
                    driver.stop_early()
                    return
            else:
                burst += 1
                if burst % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                if driver.should_stop():
                    driver.stop_early()
                    return
            driver.dispatch(Slot(ids[i], stages[i]), due)


def _chunks(times_ns: np.ndarray, ids: np.ndarray, stages: np.ndarray) -> Iterator[Chunk]:
    for a in range(0, len(times_ns), CHUNK):
        b = a + CHUNK
        yield times_ns[a:b].tolist(), ids[a:b].tolist(), stages[a:b].tolist()


@dataclass(frozen=True, slots=True)
class ArrivalWork(ScheduledWork):
    """One worker's arrivals: global request ids, intended times (ns from t = 0), stages."""

    wire_name: ClassVar[str] = "arrival-rate"
    wire_arrays: ClassVar[dict[str, str]] = {
        "request_ids": "int64",
        "times_ns": "int64",
        "stages": "int32",
    }

    request_ids: np.ndarray  # int64
    times_ns: np.ndarray  # int64, non-decreasing
    stages: np.ndarray  # int32

    async def run(self, driver: Driver) -> None:
        await send_open_loop(driver, _chunks(self.times_ns, self.request_ids, self.stages))

    def missing(self, received_ids: np.ndarray) -> tuple[int, float | None, float | None]:
        return scheduled_missing(self.request_ids, self.times_ns, received_ids)
