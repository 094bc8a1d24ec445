"""`executor = "ramping-arrival-rate"`: the rate ramps linearly from `start_rate` through
each stage's `target` (k6's ramping-arrival-rate), open loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import arrival_rate
from zqbench.load.arrival_rate import ArrivalRateLoad, parse_arrivals
from zqbench.load.executor import Executor, parse_stages
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> ArrivalRateLoad:
    stages = parse_stages(t, vus=False)
    start = t.number("start_rate") if t.has("start_rate") else 0.0
    return parse_arrivals(t, EXECUTOR.name, start, stages)


EXECUTOR = Executor(
    name="ramping-arrival-rate",
    keys=("start_rate", "stages", *arrival_rate.KEYS),
    required=("stages",),
    parse=parse,
)
