"""What the telemetry samplers share: the polling schedule, and gpu_density into their result.

Polling runs on absolute times, so the readings stay evenly spaced over a long run (sleeping
a fixed interval after each read would drift by the reads' own cost); a read that runs late
skips the slots it missed instead of bursting to catch up, so a slow device or endpoint is
not hammered.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from zqbench.hooks.contract import HookResult
from zqbench.samples.writer import load_samples
from zqbench.telemetry import density


def poll_every(interval_s: float, stopping: threading.Event, read: Callable[[], None]) -> None:
    """Call `read` at once and then every `interval_s` until `stopping` is set.

    `read` may set `stopping` itself to end the polling (a device that stopped answering)."""
    step_ns = int(interval_s * 1e9)
    next_ns = time.perf_counter_ns()
    while True:
        read()
        next_ns += step_ns
        now = time.perf_counter_ns()
        if next_ns < now:  # fell behind (a slow read): skip the missed slots
            next_ns = now + step_ns - (now - next_ns) % step_ns
        if stopping.wait((next_ns - now) / 1e9):
            return


def add_gpu_density(
    result: HookResult, key: str, readings: pd.DataFrame, out_dir: Path, start_epoch_ns: int
) -> None:
    """The run's gpu_density from `readings` (`t_epoch_ns`, `util`) as `result.telemetry[key]`,
    or a note saying why it is unavailable (never 0): no samples on disk (the run failed
    early), or no reading while requests were in flight."""
    try:
        # Hooks stop before the run merges its streams into samples.parquet: whichever is
        # there, read when the load has ended.
        samples = load_samples(out_dir, columns=("t_send", "t_end")).to_pandas()
    except Exception as exc:  # no samples on disk (the run failed early): no density
        result.notes.append(f"gpu_density unavailable: {type(exc).__name__}: {exc}")
        return
    value = density.gpu_density(readings, samples, start_epoch_ns)
    if value is None:
        result.notes.append("gpu_density unavailable: no GPU reading while requests ran")
    else:
        result.telemetry[key] = value
