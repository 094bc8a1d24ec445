"""The bundled `overload` scenario shows the zero-queue contract, and fifo breaking it.

Both schedulers get the same scaled-down run (7.5 req/s baseline, a step to 150 req/s for
3 s, against ~60 req/s of capacity: 4 sim slots, 32 output tokens). The pool is warmed
with enough connections for the fifo backlog: opening hundreds of connections mid-run on
two busy cores would make the generator itself fall behind.
"""

from __future__ import annotations

import pytest

from tests.conftest import PerAttempt
from tests.scenarios_e2e.conftest import run_bundled
from zqbench.summary import FalseRefusals, Summary, Unavailable

pytestmark = pytest.mark.slow  # two bundled-scenario runs of ~10 s each

# Every figure below that zqbench measures on the client (time to reject, latency) also
# carries the client's own lateness when the machine is busy: the generator shares a core
# with whatever else runs (the acceptance check puts a CPU hog there). Measured on this
# project's busy 2-core machine, time_to_reject p99 tracked schedule_lag p99 (42 vs 42 ms,
# 78 vs 76, 343 vs 361), so those bounds get the run's own schedule_lag p99 as slack, and
# the generator's lateness is tolerated up to 1 s (the contract is the server's).
SCALE = {
    "rate_scale": 0.75,
    "duration_scale": 0.15,
    "warm_connections": 512,
    "max_schedule_lag_s": 1.0,
}


@pytest.fixture
def runs(tmp_path_factory: pytest.TempPathFactory, per_attempt: PerAttempt) -> dict[str, Summary]:
    def make() -> dict[str, Summary]:
        out = tmp_path_factory.mktemp("overload")
        return {
            s: run_bundled("overload", out / s, scheduler=s, **SCALE).summary
            for s in ("zero-queue", "fifo")
        }

    return per_attempt("overload runs", make)  # once, and again for a rerun


def test_zero_queue_refuses_fast_with_retry_after(runs: dict[str, Summary]) -> None:
    """Overload becomes 529s (never 429s or timeouts), each refused within milliseconds and
    carrying Retry-After; the admitted requests keep a tight distribution."""
    s = runs["zero-queue"]
    assert s.validity.ok, s.validity.reasons
    migration = s.migration
    assert (migration.baseline.stage, migration.overload.stage) == (0, 2)
    assert migration.baseline.share == {"200": 1.0}
    assert migration.overload.share["529"] > 0.3
    assert set(s.status_codes) == {"200", "529"}
    lag = s.metrics["schedule_lag"].p99
    seen = f"schedule_lag p99 {lag * 1e3:.1f} ms"
    assert s.metrics["time_to_reject"].p99 < 0.05 + lag, seen
    assert s.retry_after.share == 1.0
    over = migration.overload
    assert over.latency_p99 < 2.0 * over.latency_p50 + lag, f"{over}; {seen}"
    assert s.metrics["server_queue"].p99 < 0.005  # the server's own clock: no slack
    over_time = s.status_mix.over_time
    refused_bins = [i for i, n in enumerate(over_time.counts["529"]) if n]
    assert refused_bins and all(2 <= i <= 6 for i in refused_bins)  # only while overloaded
    verdicts = {x.expr: x.verdict for x in s.slos}
    assert verdicts["status_429:rate<0.01"] == verdicts["status_0:rate<0.01"] == "pass"
    if lag <= 0.010:  # the generator held zqbench's default limit: no slack in the SLO gate
        assert verdicts["latency:p99/p50<=1.5"] != "fail", seen


def test_fifo_queues_instead(runs: dict[str, Summary]) -> None:
    """fifo refuses nothing: the excess waits, so server_queue and latency grow by orders of
    magnitude over zero-queue's, and the ttft gate fails."""
    fifo, zq = runs["fifo"], runs["zero-queue"]
    # Hundreds of open streams on two busy cores can push the generator's own lag past
    # 10 ms (the run is then `invalid`); the contrast below is server-side and far larger.
    assert fifo.metrics["schedule_lag"].p99 < 0.5
    assert set(fifo.status_codes) == {"200"}
    assert isinstance(fifo.retry_after, Unavailable)
    over_fifo, over_zq = fifo.migration.overload, zq.migration.overload
    # 12x at the least in 5 busy runs, the zero-queue p99 inflated by the client's lateness.
    assert over_fifo.latency_p99 > 5 * over_zq.latency_p99
    assert over_fifo.latency_p99 > 10 * fifo.migration.baseline.latency_p99
    assert fifo.metrics["server_queue"].p99 > 100 * zq.metrics["server_queue"].p99
    verdicts = {x.expr: x.verdict for x in fifo.slos}
    assert verdicts["ttft:p99<100ms"] == "fail"
    assert fifo.verdict in ("fail", "invalid")


def test_each_request_is_served_or_refused_fast_on_zero_queue_and_queued_on_fifo(
    runs: dict[str, Summary],
) -> None:
    """#21's outcomes, judged by the server's timing headers: zero-queue admits at once and
    refuses fast; fifo's admitted requests past its slots wait (the overload stage's, most
    of them)."""
    zq, fifo = runs["zero-queue"].outcomes, runs["fifo"].outcomes
    assert zq is not None and fifo is not None
    assert zq.evidence["server_queue"] == zq.counts["served"] + zq.counts["queued"]
    assert zq.admitted_queued_share is not None and zq.admitted_queued_share <= 0.01, zq.counts
    assert zq.counts["refused_fast"] > 0 and zq.counts["refused_slow"] == 0, zq.counts
    assert zq.by_stage["0"].counts["queued"] == 0
    overload = fifo.by_stage["2"]
    assert overload.admitted_queued_share is not None and overload.admitted_queued_share > 0.5
    assert fifo.by_stage["0"].admitted_queued_share == 0.0  # the baseline fits the slots
    assert fifo.counts["refused_fast"] == fifo.counts["refused_slow"] == 0
    # Every zero-queue refusal came with its slots full: none false, by the slots it states.
    false = zq.false_refusals
    assert isinstance(false, FalseRefusals), false
    assert false.capacity.source == "stated" and false.capacity.value == 4
    assert false.refusals == zq.counts["refused_fast"]
    assert false.count == 0, (false.t[:10], false.occupancy[:10])


def test_summary_md_shows_the_migration(runs: dict[str, Summary]) -> None:
    from zqbench.outputs.render import render_summary_md

    text = render_summary_md(runs["zero-queue"])
    assert "### Error migration: baseline vs overload" in text
    assert "| `529` | 0.00% |" in text
    assert "100.00% carried Retry-After" in text
    assert "### Status mix by stage" in text
