"""`executor = "constant-vus"`: `vus` virtual users for `duration` (k6's constant-vus),
closed loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import vus
from zqbench.load.executor import Executor, Stage, graceful_stop
from zqbench.load.vus import VuLoad
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> VuLoad:
    duration = t.duration("duration", positive=True)
    users = t.integer("vus", minimum=1)
    return VuLoad(
        executor=EXECUTOR.name,
        start_vus=users,
        stages=(Stage(duration, float(users), None),),
        think_time_s=t.duration("think_time") if t.has("think_time") else 0.0,
        duration_s=duration,
        graceful_stop_s=graceful_stop(t),
    )


EXECUTOR = Executor(
    name="constant-vus",
    keys=("vus", "duration", *vus.KEYS),
    required=("vus", "duration"),
    parse=parse,
)
