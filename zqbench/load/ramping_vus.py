"""`executor = "ramping-vus"`: the number of virtual users ramps from `start_vus` through
each stage's `target`, one whole user at a time (k6's ramping-vus), closed loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import vus
from zqbench.load.executor import Executor, graceful_stop, parse_stages
from zqbench.load.vus import VuLoad
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> VuLoad:
    stages = parse_stages(t, vus=True)
    return VuLoad(
        executor=EXECUTOR.name,
        start_vus=t.integer("start_vus", minimum=0) if t.has("start_vus") else 0,
        stages=stages,
        think_time_s=t.duration("think_time") if t.has("think_time") else 0.0,
        duration_s=sum(s.duration_s for s in stages),
        graceful_stop_s=graceful_stop(t),
    )


EXECUTOR = Executor(
    name="ramping-vus",
    keys=("start_vus", "stages", *vus.KEYS),
    required=("stages",),
    parse=parse,
)
