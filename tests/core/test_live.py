"""The live view's numbers: worker counters summed, recent latencies pooled (nearest rank)."""

from __future__ import annotations

from rich.console import Console

from zqbench.engines.live import LiveStats, Progress, merge_snapshots
from zqbench.live_view import LiveView


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
