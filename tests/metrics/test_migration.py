"""Error-code migration in summary.json: status over time, baseline vs overload, Retry-After."""

from __future__ import annotations

import numpy as np

from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import summarize
from zqbench.summary import MigrationRow, RetryAfter, Unavailable

from .conftest import build_samples
from .test_summary import run_info

# Stage 0 (0-2 s): 20 requests at 10 req/s, all 200 in 10 ms.
# Stage 1 (2-3 s): 50 requests at 50 req/s: 20 ok in 10..29 ms, 25 x 529 in 1 ms (20 of
# them with Retry-After), 5 x 429 in 400 ms.
STAGES = [StageInfo("baseline", 0.0, 2.0, 10.0), StageInfo("overload", 2.0, 3.0, 50.0)]


def samples():
    t_send = np.concatenate([np.arange(20) * 100, 2000 + np.arange(50) * 20]).astype(np.int64)
    status = [200] * 20 + [200] * 20 + [529] * 25 + [429] * 5
    latency_ms = [10.0] * 20 + list(np.arange(10.0, 30.0)) + [1.0] * 25 + [400.0] * 5
    retry = [None] * 40 + [1.0] * 20 + [None] * 5 + [2.0] * 5
    t_send_ns = t_send * 1_000_000
    return build_samples(
        latency_ms,
        stage=[0] * 20 + [1] * 50,
        t_send=t_send_ns,
        t_intended=t_send_ns,
        t_headers=t_send_ns,
        t_first_token=t_send_ns,
        t_end=t_send_ns + (np.array(latency_ms) * 1_000_000).astype(np.int64),
        status=status,
        error=[None] * 40 + ["http_529"] * 25 + ["http_429"] * 5,
        retry_after_s=retry,
    )


def summary():
    return summarize(samples(), run=run_info(duration_s=3.0, stages=STAGES), slos=[])


def test_migration_compares_first_stage_with_busiest() -> None:
    m = summary().migration
    assert m.baseline.stage == 0 and m.overload.stage == 1
    assert m.baseline.send_rate == 10.0 and m.overload.send_rate == 50.0
    assert m.baseline.share == {"200": 1.0}
    assert m.overload.share == {"529": 0.5, "200": 0.4, "429": 0.1}
    assert m.rows[0] == MigrationRow(status="529", baseline=0.0, overload=0.5)
    # Admitted latency of stage 1: 10..29 ms; nearest rank p50 = x(10) = 19 ms, p99 = 29 ms.
    assert np.isclose(m.overload.latency_p50, 0.019)
    assert np.isclose(m.overload.latency_p99, 0.029)
    assert np.isclose(m.overload.latency_p99_p50, 29 / 19)
    assert np.isclose(m.overload.time_to_reject_p99, 0.4)  # 30 refusals: x(30)
    assert m.baseline.time_to_reject_p99 is None


def test_status_over_time_counts_per_second() -> None:
    t = summary().status_mix.over_time
    assert t.bin_s == 1.0 and t.start_s == [0.0, 1.0, 2.0]
    assert t.counts == {"200": [10, 10, 20], "529": [0, 0, 25], "429": [0, 0, 5]}


def test_retry_after_share_of_refusals() -> None:
    r = summary().retry_after
    assert r == RetryAfter(refusals=30, with_retry_after=25, share=25 / 30, min_s=1.0, max_s=2.0)


def test_one_stage_has_no_migration_and_no_refusals_no_retry_after() -> None:
    s = summarize(build_samples(n=10), run=run_info(stages=[StageInfo("s", 0.0, 10.0)]), slos=[])
    assert isinstance(s.migration, Unavailable)
    assert s.retry_after == Unavailable(unavailable="no request was refused (429/503/529)")
