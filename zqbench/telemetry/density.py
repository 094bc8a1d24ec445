"""gpu_density: the mean GPU busy fraction during the windows when >= 1 request is in flight.

    gpu_density(telemetry, samples, start_epoch_ns) -> float | None

`telemetry` has one row per reading: `t_epoch_ns` (int64) and `util` (0..1), one row per
GPU per reading. `samples` has the run's `t_send` and `t_end` (ns from the run's start,
which is `start_epoch_ns` in epoch time). A request is in flight over [t_send, t_end); a
reading counts when its time falls inside the union of those intervals, so the idle gaps
between requests do not dilute the figure (docs/design.md). With several GPUs the
readings of all of them are averaged. No readings inside a busy window: None, not 0.

A reading is the GPU's utilization averaged over the driver's last sample period (NVML:
1/6 s to 1 s; DCGM: its collect interval), so a window shorter than that is blurred.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def busy_intervals(t_send_ns: np.ndarray, t_end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [t_send, t_end) as sorted, disjoint (starts, ends)."""
    keep = t_end_ns > t_send_ns
    order = np.argsort(t_send_ns[keep], kind="stable")
    starts, ends = t_send_ns[keep][order], t_end_ns[keep][order]
    if len(starts) == 0:
        return starts, ends
    reach = np.maximum.accumulate(ends)
    # A new window opens where a request starts after everything before it has ended
    # (touching intervals merge).
    new = np.empty(len(starts), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]
    group_end = np.append(np.flatnonzero(new)[1:] - 1, len(starts) - 1)
    return starts[new], reach[group_end]


def in_flight(t_ns: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each time, whether it lies in one of the disjoint [start, end) intervals."""
    idx = np.searchsorted(starts, t_ns, side="right") - 1
    inside = idx >= 0
    inside[inside] = t_ns[inside] < ends[idx[inside]]
    return inside


def gpu_density(
    telemetry: pd.DataFrame, samples: pd.DataFrame, start_epoch_ns: int
) -> float | None:
    if len(telemetry) == 0 or len(samples) == 0:
        return None
    starts, ends = busy_intervals(
        samples["t_send"].to_numpy(dtype=np.int64), samples["t_end"].to_numpy(dtype=np.int64)
    )
    t_rel = telemetry["t_epoch_ns"].to_numpy(dtype=np.int64) - start_epoch_ns
    util = telemetry["util"].to_numpy(dtype=np.float64, na_value=np.nan)
    use = in_flight(t_rel, starts, ends) & ~np.isnan(util)
    if not use.any():
        return None
    return float(util[use].mean())
