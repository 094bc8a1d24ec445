"""The live view's numbers: worker counters summed, recent latencies pooled (nearest rank)."""

from __future__ import annotations

import pytest
from rich.console import Console

from zqbench.cli.live_view import LiveView
from zqbench.engines.live import RECENT, LiveStats, Progress, WorkerLine, merge_snapshots


def _worker(sent: int, latencies: list[float], stage: int, status: str) -> LiveStats:
    stats = LiveStats(sent=sent, due=sent + 1, inflight=1, stage=stage)
    for ms in latencies:
        stats.record(status, status == "200", ms)
    return stats


def test_merge_sums_counters_and_pools_latencies() -> None:
    a = _worker(3, [10.0, 30.0], stage=0, status="200")
    b = _worker(5, [20.0, 40.0], stage=1, status="200")
    c = _worker(2, [99.0], stage=1, status="529")  # refused: counted, not in the latencies
    merged = merge_snapshots([a.snapshot(), b.snapshot(), c.snapshot()])
    assert (merged.sent, merged.due, merged.inflight, merged.stage) == (10, 13, 3, 1)
    assert (merged.done, merged.ok, merged.workers) == (5, 4, 3)
    assert merged.status == {"200": 4, "529": 1}
    # nearest rank over [10, 20, 30, 40]: p50 is the 2nd value, p99 the 4th
    assert (merged.p50_ms, merged.p99_ms) == (20.0, 40.0)


def test_merge_of_no_latency_says_so() -> None:
    merged = merge_snapshots([LiveStats(sent=1).snapshot()])
    assert merged.p50_ms is None and merged.p99_ms is None


def test_the_view_shows_the_progress() -> None:
    view = LiveView(enabled=False)
    view.update(
        Progress(
            sent=120,
            due=130,
            inflight=7,
            stage=2,
            status={"200": 100, "529": 13},
            p50_ms=12.5,
            p99_ms=80.0,
            workers=2,
        )
    )
    console = Console(width=100, record=True)
    console.print(view)
    text = console.export_text()
    for part in ("stage", "2", "sent", "120", "in flight", "7", "200: 100", "529: 13"):
        assert part in text, text
    assert "p50 12.5 ms" in text and "p99 80.0 ms" in text, text


def test_each_worker_keeps_its_own_sent_count_and_lag() -> None:
    # Worker 1's lags 0.1 .. 2.0 ms: nearest-rank p99 of 20 values is the 20th, 2.0 ms;
    # worker 0 sent nothing late yet (closed loop, or no send so far): no lag figure.
    late = LiveStats(worker=1, sent=20, due=21, inflight=2)
    for i in range(1, 21):
        late.record_lag(i / 10)
    idle = LiveStats(worker=0, sent=5, due=5)
    merged = merge_snapshots([late.snapshot(), idle.snapshot()])
    assert merged.per_worker == (
        WorkerLine(worker=0, sent=5, due=5, inflight=0, lag_p99_ms=None),
        WorkerLine(worker=1, sent=20, due=21, inflight=2, lag_p99_ms=2.0),
    )


def test_the_lag_ring_keeps_the_latest_sends() -> None:
    stats = LiveStats()
    for _ in range(RECENT):
        stats.record_lag(50.0)  # an early stall...
    for _ in range(RECENT):
        stats.record_lag(0.25)  # ...pushed out by the sends since
    assert stats.snapshot().lag_p99_ms == 0.25


def test_the_view_shows_each_workers_rate_and_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("zqbench.cli.live_view.time.monotonic", lambda: now[0])
    view = LiveView(enabled=False)
    # Two updates 2 s apart: worker 0 sent 1000 more (500 req/s), worker 1 400 (200 req/s).
    for at, sent0, sent1 in ((100.0, 100, 900), (102.0, 1100, 1300)):
        now[0] = at
        view.update(
            Progress(
                sent=sent0 + sent1,
                workers=2,
                per_worker=(
                    WorkerLine(worker=0, sent=sent0, due=sent0, inflight=3, lag_p99_ms=0.42),
                    WorkerLine(worker=1, sent=sent1, due=sent1, inflight=1, lag_p99_ms=None),
                ),
            )
        )
    console = Console(width=120, record=True)
    console.print(view)
    text = console.export_text()
    assert "worker 0   sent 1100  500 req/s  in flight 3  lag p99 0.42 ms" in text, text
    assert "worker 1   sent 1300  200 req/s  in flight 1  lag p99 -" in text, text


def test_one_worker_shows_no_worker_lines() -> None:
    view = LiveView(enabled=False)
    view.update(Progress(sent=1, workers=1, per_worker=(WorkerLine(0, 1, 1, 0, None),)))
    console = Console(width=120, record=True)
    console.print(view)
    assert "worker 0" not in console.export_text()
