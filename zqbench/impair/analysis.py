"""What packet loss did to the run: P99 during loss vs baseline, error share, recovery time.

    packet_loss_analysis(samples, stages, impaired) -> dict (JSON-ready; seconds)
    packet_loss_record(samples, stages, hook_record) -> summary.PacketLoss | None

packet_loss_record is what a run's analysis stage calls: the analysis above, with what the
PacketLossHook recorded (the loss, the windows the rules were really in place, the packets
they dropped), typed for summary.json's `packet_loss`.

- baseline: the unimpaired stages before the first impaired one.
- latency is `t_end - t_send` of successful requests; P99 is the nearest-rank order
  statistic (`zqbench.metrics.quantiles`), per stage of the intended send.
- error share: failed or refused requests / requests, per stage.
- recovery time: seconds from the end of the last impaired window until the first send
  time t from which the P99 of the requests sent in [t, t + RECOVERY_WINDOW_S) is within
  10 % of the baseline P99 (<= 1.1 x baseline). The window must lie inside the run's
  schedule and hold at least RECOVERY_MIN_REQUESTS successful requests. A forward window
  makes "already normal right after the loss" read 0 s rather than the window's length.
  Never back within 10 %: `recovered` is false and `recovery_s` null.

No value is ever invented: a P99 without samples is null, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zqbench.load.spans import StageInfo
from zqbench.metrics import quantiles
from zqbench.metrics.frame import NS_PER_S, Samples, columns_of, latency
from zqbench.summary import LossWindow, PacketLoss

RECOVERY_WINDOW_S = 2.0
RECOVERY_MIN_REQUESTS = 10
RECOVERY_TOLERANCE = 0.10


def _p99_s(latency_ns: np.ndarray) -> float | None:
    ok = np.sort(latency_ns[~np.isnan(latency_ns)])
    value = quantiles.quantile(ok, 0.99)
    return None if value is None else value / NS_PER_S


def _ratio(p99_s: float | None, baseline_p99_s: float | None) -> float | None:
    if p99_s is None or not baseline_p99_s:
        return None
    return p99_s / baseline_p99_s


def recovery_time_s(
    t_send_s: np.ndarray,
    latency_s: np.ndarray,
    *,
    after_s: float,
    until_s: float,
    baseline_p99_s: float,
    window_s: float = RECOVERY_WINDOW_S,
    min_requests: int = RECOVERY_MIN_REQUESTS,
    tolerance: float = RECOVERY_TOLERANCE,
) -> float | None:
    """First t >= after_s (a send time) whose forward window's P99 is within tolerance."""
    keep = (t_send_s >= after_s) & ~np.isnan(latency_s)
    order = np.argsort(t_send_s[keep], kind="stable")
    t, lat = t_send_s[keep][order], latency_s[keep][order]
    limit = baseline_p99_s * (1.0 + tolerance)
    for i, t0 in enumerate(t):
        if t0 + window_s > until_s:  # the rest of the run is shorter than one window
            break
        j = int(np.searchsorted(t, t0 + window_s, side="left"))
        if j - i < min_requests:
            continue
        p99 = quantiles.quantile(np.sort(lat[i:j]), 0.99)
        if p99 is not None and p99 <= limit:
            return float(t0 - after_s)
    return None


def packet_loss_analysis(
    samples: Samples, stages: Sequence[StageInfo], impaired: Sequence[int]
) -> dict[str, Any]:
    """Baseline vs loss P99, error share per stage and the recovery time (module docstring)."""
    impaired_set = set(impaired)
    if not impaired_set:
        raise ValueError("packet_loss_analysis needs at least one impaired stage")
    cols = columns_of(samples)
    lat = latency(cols)  # ns, NaN where the request failed
    stage_of = samples["stage"].to_numpy(dtype=np.int64)
    first = min(impaired_set)
    base_sel = np.isin(stage_of, list(range(first)))
    loss_sel = np.isin(stage_of, sorted(impaired_set))
    baseline_p99 = _p99_s(lat[base_sel])
    loss_p99 = _p99_s(lat[loss_sel])
    n_loss = int(loss_sel.sum())
    per_stage = []
    for i, stage in enumerate(stages):
        sel = stage_of == i
        n, errors = int(sel.sum()), int((~cols.ok[sel]).sum())
        p99 = _p99_s(lat[sel])
        per_stage.append(
            {
                "stage": i,
                "name": stage.name,
                "impaired": i in impaired_set,
                "requests": n,
                "errors": errors,
                "error_share": errors / n if n else None,
                "p99_s": p99,
                "p99_ratio": _ratio(p99, baseline_p99),
            }
        )

    loss_end_s = max(stages[i].end_s for i in impaired_set)
    recovery = None
    if baseline_p99 is not None and loss_end_s < stages[-1].end_s:
        recovery = recovery_time_s(
            cols.t_send / NS_PER_S,
            lat / NS_PER_S,
            after_s=loss_end_s,
            until_s=stages[-1].end_s,
            baseline_p99_s=baseline_p99,
        )
    return {
        "impaired_stages": sorted(impaired_set),
        "baseline_stages": list(range(first)),
        "baseline_p99_s": baseline_p99,
        "loss_p99_s": loss_p99,
        "p99_delta_s": (
            None if baseline_p99 is None or loss_p99 is None else loss_p99 - baseline_p99
        ),
        "p99_ratio": _ratio(loss_p99, baseline_p99),
        "loss_error_share": (float((~cols.ok[loss_sel]).sum() / n_loss) if n_loss else None),
        "stages": per_stage,
        "recovery": {
            "recovered": recovery is not None,
            "recovery_s": recovery,
            "after_s": loss_end_s,
            "window_s": RECOVERY_WINDOW_S,
            "min_requests": RECOVERY_MIN_REQUESTS,
            "tolerance": RECOVERY_TOLERANCE,
        },
    }


def packet_loss_record(
    samples: Samples, stages: Sequence[StageInfo], hook_record: Mapping[str, Any] | None
) -> PacketLoss | None:
    """summary.json's `packet_loss` of a run whose PacketLossHook left `hook_record` (its
    environment entry); None when the run had no packet-loss impairment."""
    if not hook_record or hook_record.get("impairment") != "packet-loss":
        return None
    impaired = [i for i in hook_record.get("stages", ()) if 0 <= i < len(stages)]
    if not impaired:
        return None
    windows = [
        LossWindow(applied_s=w["applied_s"], removed_s=w.get("removed_s"))
        for w in hook_record.get("windows", ())
    ]
    # The analysis' keys are the section's fields (its stages' and recovery's too).
    return PacketLoss.model_validate(
        {
            **packet_loss_analysis(samples, stages, impaired),
            "loss": float(hook_record["loss"]),
            "windows": windows,
            "dropped_packets": int(hook_record.get("dropped_packets", 0)),
        }
    )
