"""What a distributed run adds to its summary: the workers, their clocks, what was lost,
and the validity of each worker's share (judged like the run's own)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zqbench.distributed.ledger import WorkerSlot
from zqbench.metrics import quantiles
from zqbench.metrics.sig_digits import significant
from zqbench.metrics.summarize import RunInfo
from zqbench.summary import Distributed, DistributedWorker, Summary


@dataclass(frozen=True)
class DistributedOutcome:
    # The run's `distributed` section; its workers' schedule_lag_p99_s filled by `attach`.
    record: Distributed

    @classmethod
    def of_record(cls, record: Distributed) -> DistributedOutcome:
        """The outcome a saved run's `distributed` section records (for a gate after the
        fact: `attach` then judges its workers' lag again against the samples)."""
        return cls(record)

    @property
    def lost_requests(self) -> int:
        return self.record.lost_requests

    @property
    def too_lossy(self) -> bool:
        return self.record.lost_share > self.record.max_lost_share

    def adjust(self, info: RunInfo) -> RunInfo:
        """Within the allowed loss, the lost requests leave the offered load (so the achieved
        ratio judges the workers that ran); beyond it the run is invalid anyway."""
        if not self.lost_requests or self.too_lossy or not info.offered_requests:
            return info
        kept = (info.offered_requests - self.lost_requests) / info.offered_requests
        return dataclasses.replace(
            info,
            offered_requests=info.offered_requests - self.lost_requests,
            offered_rate=None if info.offered_rate is None else info.offered_rate * kept,
        )

    def attach(self, summary: Summary, samples: pd.DataFrame) -> Summary:
        """The summary with its `distributed` section and the workers' validity reasons."""
        limit = summary.validity.thresholds.max_schedule_lag_p99_s
        workers = [
            w.model_copy(update={"schedule_lag_p99_s": _lag_p99(samples, w.index)})
            for w in self.record.workers
        ]
        reasons = list(summary.validity.reasons)
        for w in workers:
            lag = w.schedule_lag_p99_s
            if lag is not None and lag > limit:
                reasons.append(
                    f"worker {w.index} ({w.host}) fell behind its schedule: schedule_lag p99 ="
                    f" {significant(lag * 1e3, 3)} ms > {significant(limit * 1e3, 3)} ms"
                )
        if self.too_lossy:
            lost = "; ".join(
                f"worker {w.index} ({w.host}): {w.missing}" for w in workers if w.state == "lost"
            )
            reasons.append(
                f"{self.record.lost_share:.1%} of the run was lost with its workers, more than"
                f" the allowed {self.record.max_lost_share:.0%} (--max-lost-share): {lost}"
            )
        update: dict[str, object] = {
            "distributed": self.record.model_copy(update={"workers": workers})
        }
        if reasons != summary.validity.reasons:
            update["validity"] = summary.validity.model_copy(
                update={"ok": False, "reasons": reasons}
            )
            update["verdict"] = "invalid"
        elif (self.lost_requests or self.record.lost_share > 0) and summary.verdict != "invalid":
            # Within the allowed loss the numbers stand, but a run that lost a worker never
            # passes: CI must hear of it (exit 1); `distributed` says what was lost.
            update["verdict"] = "fail"
        return summary.model_copy(update=update)


def outcome(
    slots: list[WorkerSlot],
    *,
    master: str,
    offered: int,
    max_lost_share: float,
    duration_s: float,
    rejected: dict[str, int] | None = None,
) -> DistributedOutcome:
    workers = [_record(s, len(slots)) for s in slots]
    lost = sum(w.lost_requests for w in workers)
    if offered:
        share = lost / offered
    else:  # closed loop: the lost workers' VU share over the time they were gone
        share = sum(_vu_time_lost(s, len(slots), duration_s) for s in slots)
    record = Distributed(
        master=master,
        expected_workers=len(slots),
        workers=workers,
        lost_requests=lost,
        lost_share=share,
        max_lost_share=max_lost_share,
        rejected_messages=dict(rejected or {}),
    )
    return DistributedOutcome(record)


def _vu_time_lost(slot: WorkerSlot, n: int, duration_s: float) -> float:
    if slot.state != "lost" or slot.lost_at_s is None or duration_s <= 0:
        return 0.0
    return max(0.0, duration_s - slot.lost_at_s) / duration_s / n


def _record(slot: WorkerSlot, n: int) -> DistributedWorker:
    lost, first, last = slot.missing() if slot.state == "lost" else (0, None, None)
    assigned = None if slot.work is None else slot.work.assigned()
    missing = None
    at = "" if slot.lost_at_s is None else f" at t = {slot.lost_at_s:.1f} s"
    if slot.state == "lost" and lost:
        missing = (
            f"{lost} of its {assigned} scheduled requests (intended t = {first:.2f} .."
            f" {last:.2f} s) never arrived; it was lost{at} ({slot.failure})"
        )
    elif slot.state == "lost":
        missing = f"its VUs ({slot.index} mod {n}) stopped{at} ({slot.failure})"
    clock = slot.clock
    return DistributedWorker(
        index=slot.index,
        host=slot.host,
        node=slot.node,
        state="lost" if slot.state == "lost" else "stopped" if slot.state == "stopped" else "done",
        clock_offset_ns=None if clock is None else clock.offset_ns,
        clock_uncertainty_ns=None if clock is None else clock.uncertainty_ns,
        clock_rtt_ns=None if clock is None else clock.rtt_ns,
        requests_assigned=assigned,
        requests_sent=None if slot.state == "lost" else slot.sent,
        samples_received=slot.received,
        lost_requests=lost,
        missing=missing,
        schedule_lag_p99_s=None,
    )


def _lag_p99(samples: pd.DataFrame, worker: int) -> float | None:
    rows = samples[(samples["worker"] == worker) & samples["t_intended"].notna()]
    if rows.empty:
        return None
    lag = np.sort((rows["t_send"] - rows["t_intended"]).to_numpy(dtype=np.float64) / 1e9)
    return quantiles.quantile(lag, 0.99)
