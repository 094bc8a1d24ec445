"""run-start.json: what a run knows at its t = 0, so that `zqbench report` can summarise a
run that was killed before it wrote summary.json.

    hook = StartRecord(out_dir, lambda start_ns, start_epoch_ns: RunInfo(...), slos)
    # a RunHook: its start() writes the file once the schedule's t = 0 is fixed
    record = read_start(out_dir)   # (RunInfo, slos), or None when there is none

The record holds the RunInfo the run would summarise with (scenario, target, clock, stages,
offered load), its duration still 0, and the SLOs; secrets redacted as in summary.json. It
is superseded by summary.json and removed once that is written (pipeline/write.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import TypeAdapter

from zqbench.hooks.contract import HookContext, HookResult
from zqbench.metrics.summarize import RunInfo
from zqbench.outputs.json_out import write_atomic
from zqbench.outputs.paths import RUN_START_JSON
from zqbench.redact import redact

START_SCHEMA = "zqbench.run-start/1"

InfoAtStart = Callable[[int, int], RunInfo]  # (start_monotonic_ns, start_epoch_ns) -> RunInfo


class StartRecord:
    """A RunHook that writes run-start.json at t = 0."""

    name = "start_record"

    def __init__(self, out_dir: Path, info: InfoAtStart, slos: Sequence[str]) -> None:
        self.out_dir = out_dir
        self.info = info
        self.slos = tuple(slos)
        self.problem = ""

    def start(self, ctx: HookContext) -> None:
        # The same instant on the wall clock: now, less the time since t = 0.
        epoch_ns = time.time_ns() - (time.perf_counter_ns() - ctx.start_monotonic_ns)
        try:
            write_start(self.out_dir, self.info(ctx.start_monotonic_ns, epoch_ns), self.slos)
        except OSError as exc:  # the run can go on; only a crash's recovery would lose
            self.problem = f"{RUN_START_JSON} not written: {exc.strerror or exc}"

    def stop(self) -> HookResult:
        return HookResult(notes=[self.problem] if self.problem else [])


def write_start(out_dir: Path, info: RunInfo, slos: Sequence[str]) -> Path:
    basis = info.outcome_basis
    run = dataclasses.asdict(dataclasses.replace(info, outcome_basis=None))
    run["outcome_basis"] = None if basis is None else basis.model_dump(mode="json")
    data = {"schema": START_SCHEMA, "slos": list(slos), "run": run}
    text = json.dumps(redact(data), indent=1, allow_nan=False) + "\n"
    return write_atomic(out_dir / RUN_START_JSON, text)


def read_start(out_dir: Path) -> tuple[RunInfo, tuple[str, ...]] | None:
    """The record of `out_dir`, or None when it has none, or one this version cannot read
    (another schema, or a damaged file: every field is checked against RunInfo's types,
    so a record that says `"run": "x"` is unreadable, never an internal error)."""
    try:
        data = json.loads((out_dir / RUN_START_JSON).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != START_SCHEMA:
            return None
        slos = data["slos"]
        if not isinstance(slos, list):
            return None
        return _RUN_INFO.validate_python(data["run"]), tuple(str(s) for s in slos)
    except (OSError, ValueError, KeyError):  # pydantic's ValidationError is a ValueError
        return None


_RUN_INFO = TypeAdapter(RunInfo)
