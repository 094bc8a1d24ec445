"""`executor = "constant-vus"`: `vus` virtual users for `duration` (k6's constant-vus),
closed loop."""

from __future__ import annotations

from pathlib import Path

from zqbench.load import vus
from zqbench.load.executor import Executor, Stage
from zqbench.load.vus import VuLoad, parse_vus
from zqbench.strict_toml import Table


def parse(t: Table, folder: Path) -> VuLoad:
    duration = t.duration("duration", positive=True)
    users = t.integer("vus", minimum=1)
    return parse_vus(t, EXECUTOR.name, users, (Stage(duration, float(users), None),))


EXECUTOR = Executor(
    name="constant-vus",
    keys=("vus", "duration", *vus.KEYS),
    required=("vus", "duration"),
    parse=parse,
)
