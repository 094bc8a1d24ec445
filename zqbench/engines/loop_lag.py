"""How late a worker's event loop runs what is ready: the client's own lag (#43 item 3).

A token is stamped when the loop runs the read callback of its socket, not when it reached
the kernel: a loop busy with other streams stamps it late, and an ITL or a TTFT measured
that way is the client's, not the server's. The probe measures the same wait on the same
loop: a timer every PROBE_INTERVAL_S, and how much later than asked the loop ran it. A
socket that became readable waits at most about as long (the loop runs its ready callbacks
and timers in one pass), so the probe's p99 bounds what the run's token stamps may be late
by at the tail. A run whose client lag p99 passes its limit is INVALID (like schedule lag):
its latencies are partly the client's.

Each worker keeps a histogram (BUCKET_NS wide, the last bucket open-ended with the largest
value kept) and writes it beside its samples (`client_lag.w<N>.json`); the analysis merges
the workers' histograms.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PROBE_INTERVAL_S = 0.005  # 200 wake-ups a second: nothing against a loop's 50,000 reads
BUCKET_NS = 100_000  # 0.1 ms
LAST_BUCKET = 10_000  # 1 s and more: one bucket, with the largest value kept
FILE_PATTERN = "client_lag.w*.json"


def lag_path(out_dir: Path, worker: int) -> Path:
    return out_dir / f"client_lag.w{worker}.json"


@dataclass
class LoopLag:
    """The lateness of one loop's probe timer, as a histogram."""

    n: int = 0
    max_ns: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # bucket -> probes

    def add(self, late_ns: int) -> None:
        late_ns = max(0, late_ns)
        bucket = min(late_ns // BUCKET_NS, LAST_BUCKET)
        self.counts[bucket] = self.counts.get(bucket, 0) + 1
        self.n += 1
        self.max_ns = max(self.max_ns, late_ns)

    async def watch(self, interval_s: float = PROBE_INTERVAL_S) -> None:
        """Probe until cancelled."""
        interval_ns = int(interval_s * 1e9)
        while True:
            t0 = time.perf_counter_ns()
            await asyncio.sleep(interval_s)
            self.add(time.perf_counter_ns() - t0 - interval_ns)

    def merge(self, other: LoopLag) -> None:
        for bucket, count in other.counts.items():
            self.counts[bucket] = self.counts.get(bucket, 0) + count
        self.n += other.n
        self.max_ns = max(self.max_ns, other.max_ns)

    def quantile_s(self, q: float) -> float | None:
        """The q-quantile's bucket's upper edge in seconds (nearest rank; the largest value
        in the open-ended last bucket); None without probes."""
        if not self.n:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                if bucket == LAST_BUCKET:
                    return self.max_ns / 1e9
                return min((bucket + 1) * BUCKET_NS, self.max_ns) / 1e9
        return self.max_ns / 1e9  # unreachable: the counts add up to n

    def write(self, path: Path) -> None:
        doc = {
            "interval_s": PROBE_INTERVAL_S,
            "bucket_ns": BUCKET_NS,
            "n": self.n,
            "max_ns": self.max_ns,
            "counts": {str(b): c for b, c in sorted(self.counts.items())},
        }
        path.write_text(json.dumps(doc) + "\n")

    @classmethod
    def read(cls, path: Path) -> LoopLag:
        """A worker's histogram (ValueError, KeyError or TypeError for a damaged file)."""
        doc = json.loads(path.read_text())
        if doc["bucket_ns"] != BUCKET_NS:
            raise ValueError(f"bucket_ns {doc['bucket_ns']} is not {BUCKET_NS}")
        lag = cls(int(doc["n"]), int(doc["max_ns"]))
        lag.counts = {int(b): int(c) for b, c in doc["counts"].items()}
        if sum(lag.counts.values()) != lag.n or min(lag.counts, default=0) < 0:
            raise ValueError("the counts do not add up to n")
        return lag


def merged(paths: Iterable[Path]) -> LoopLag | None:
    """The workers' histograms as one; None when no worker wrote one (a run saved before the
    probe, or one whose files were lost). A damaged file is left out."""
    total: LoopLag | None = None
    for path in paths:
        try:
            lag = LoopLag.read(path)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if total is None:
            total = lag
        else:
            total.merge(lag)
    return total
