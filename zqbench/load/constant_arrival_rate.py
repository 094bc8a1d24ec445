"""`executor = "constant-arrival-rate"`: `rate` requests per second for `duration` (k6's
constant-arrival-rate), open loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import arrival_rate
from zqbench.load.arrival_rate import ArrivalRateLoad, parse_arrivals
from zqbench.load.executor import Executor, Stage
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> ArrivalRateLoad:
    duration = t.duration("duration", positive=True)
    rate = t.number("rate", strict=True)
    return parse_arrivals(t, EXECUTOR.name, rate, (Stage(duration, rate, None),))


EXECUTOR = Executor(
    name="constant-arrival-rate",
    keys=("rate", "duration", *arrival_rate.KEYS),
    required=("rate", "duration"),
    parse=parse,
)
