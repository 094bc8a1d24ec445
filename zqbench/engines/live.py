"""Running counters a worker keeps for the live view; summed across workers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

RECENT = 2048  # latencies kept for the "so far" percentiles


@dataclass(slots=True)
class LiveStats:
    sent: int = 0
    due: int = 0  # open loop: requests whose intended time has passed (the offered load)
    done: int = 0
    ok: int = 0
    inflight: int = 0
    stage: int = 0
    status: Counter[str] = field(default_factory=Counter)
    recent_ms: list[float] = field(default_factory=list)
    _cursor: int = 0

    def record(self, status_key: str, ok: bool, latency_ms: float) -> None:
        self.done += 1
        self.status[status_key] += 1
        if ok:
            self.ok += 1
            if len(self.recent_ms) < RECENT:
                self.recent_ms.append(latency_ms)
            else:
                self.recent_ms[self._cursor] = latency_ms
                self._cursor = (self._cursor + 1) % RECENT

    def snapshot(self) -> dict[str, object]:
        return {
            "sent": self.sent,
            "due": self.due,
            "done": self.done,
            "ok": self.ok,
            "inflight": self.inflight,
            "stage": self.stage,
            "status": dict(self.status),
            "recent_ms": list(self.recent_ms),
        }


def merge_snapshots(snapshots: list[dict[str, object]]) -> dict[str, object]:
    """Sum counters across workers; pool recent latencies for the percentiles."""
    status: Counter[str] = Counter()
    recent: list[float] = []
    total = {"sent": 0, "due": 0, "done": 0, "ok": 0, "inflight": 0, "stage": 0}
    for snap in snapshots:
        for key in ("sent", "due", "done", "ok", "inflight"):
            total[key] += int(snap[key])  # type: ignore[call-overload]
        total["stage"] = max(total["stage"], int(snap["stage"]))  # type: ignore[call-overload]
        status.update(snap["status"])  # type: ignore[arg-type]
        recent.extend(snap["recent_ms"])  # type: ignore[arg-type]
    p50 = p99 = None
    if recent:
        arr = np.sort(np.asarray(recent))
        p50 = float(arr[int(np.ceil(0.50 * len(arr))) - 1])
        p99 = float(arr[int(np.ceil(0.99 * len(arr))) - 1])
    return {**total, "status": dict(status), "p50_ms": p50, "p99_ms": p99}
