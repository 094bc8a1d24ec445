"""The client-lag probe (#43 item 3): how late a worker's loop runs a ready timer, as a
histogram that merges across workers and survives its file."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from zqbench.engines.loop_lag import BUCKET_NS, LoopLag, lag_path, merged


def test_quantiles_are_bucket_edges_and_the_tail_is_the_largest_value() -> None:
    lag = LoopLag()
    for late_ms in [0.05] * 98 + [3.2, 2500.0]:
        lag.add(int(late_ms * 1e6))
    assert lag.n == 100 and lag.max_ns == 2_500_000_000
    assert lag.quantile_s(0.5) == BUCKET_NS / 1e9  # the first bucket's edge, 0.1 ms
    assert lag.quantile_s(0.99) == 3.3e-3  # 3.2 ms falls in [3.2, 3.3)
    assert lag.quantile_s(1.0) == 2.5  # past 1 s: the largest value itself
    assert LoopLag().quantile_s(0.99) is None


def test_workers_merge_through_their_files_and_a_damaged_file_is_left_out(tmp_path: Path) -> None:
    a, b = LoopLag(), LoopLag()
    for _ in range(99):
        a.add(10_000)
    b.add(40_000_000)
    a.write(lag_path(tmp_path, 0))
    b.write(lag_path(tmp_path, 1))
    lag_path(tmp_path, 2).write_text('{"bucket_ns": 100000, "n": 5, "max_ns": 1, "counts": {}}')
    total = merged(sorted(tmp_path.glob("client_lag.w*.json")))
    assert total is not None and total.n == 100 and total.max_ns == 40_000_000
    assert (
        total.quantile_s(0.99) == 1e-4 and total.quantile_s(1.0) == 0.04
    )  # never past the largest
    assert merged([]) is None


def test_a_busy_loop_is_seen_late_and_an_idle_one_is_not() -> None:
    async def probe(block_s: float) -> LoopLag:
        lag = LoopLag()
        task = asyncio.get_running_loop().create_task(lag.watch(0.005))
        for _ in range(10):
            await asyncio.sleep(0.01)
            time.sleep(block_s)  # a callback that holds the loop, as a burst of reads does
        task.cancel()
        return lag

    busy = asyncio.run(probe(0.03))
    idle = asyncio.run(probe(0.0))
    assert busy.n >= 10 and busy.quantile_s(0.9) >= 0.02  # held 30 ms at a time
    assert idle.n >= 10 and idle.max_ns < busy.max_ns
