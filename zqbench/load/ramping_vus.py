"""`executor = "ramping-vus"`: the number of virtual users ramps from `start_vus` through
each stage's `target`, one whole user at a time (k6's ramping-vus), closed loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import vus
from zqbench.load.executor import Executor, parse_stages
from zqbench.load.vus import VuLoad, parse_vus
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> VuLoad:
    stages = parse_stages(t, vus=True)
    start = t.integer("start_vus", minimum=0) if t.has("start_vus") else 0
    return parse_vus(t, EXECUTOR.name, start, stages)


EXECUTOR = Executor(
    name="ramping-vus",
    keys=("start_vus", "stages", *vus.KEYS),
    required=("stages",),
    parse=parse,
)
