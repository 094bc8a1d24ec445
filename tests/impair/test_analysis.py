"""packet_loss_analysis known answers: P99 under loss vs baseline, error share, recovery."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from zqbench.impair import packet_loss_analysis
from zqbench.load.spans import StageInfo

MS = 1_000_000
STAGES = [StageInfo("baseline", 0, 10), StageInfo("loss", 10, 20), StageInfo("recovery", 20, 30)]


def _samples(latency_ms: list[float], *, failed: set[int] = frozenset()) -> pd.DataFrame:
    """One request every 100 ms over 30 s (300), with the given latencies."""
    n = len(latency_ms)
    t_send = np.arange(n, dtype=np.int64) * 100 * MS
    lat = np.asarray(latency_ms) * MS
    return pd.DataFrame(
        {
            "t_send": t_send,
            "t_end": t_send + lat.astype(np.int64),
            "stage": (t_send // (10_000 * MS)).astype(np.int32),
            "status": [0 if i in failed else 200 for i in range(n)],
            "error": [("reset" if i in failed else None) for i in range(n)],
        }
    )


def test_rto_delays_raise_the_p99_and_recovery_is_immediate() -> None:
    """Baseline 50 ms; 5 of 100 loss requests wait a 200 ms RTO; recovery back at once."""
    lat = [50.0] * 300
    for i in (105, 120, 140, 160, 180):
        lat[i] = 250.0
    result = packet_loss_analysis(_samples(lat), STAGES, [1])
    assert result["baseline_p99_s"] == pytest.approx(0.05)
    assert result["loss_p99_s"] == pytest.approx(0.25)
    assert result["p99_delta_s"] == pytest.approx(0.2)
    assert result["p99_ratio"] == pytest.approx(5.0)
    assert result["recovery"]["recovered"] is True
    assert result["recovery"]["recovery_s"] == pytest.approx(0.0)
    assert [s["impaired"] for s in result["stages"]] == [False, True, False]


def test_recovery_time_is_when_the_rolling_p99_is_back_within_10_percent() -> None:
    """Slow (200 ms) for the first 1.5 s after the loss, then 54 ms (within 10 % of 50)."""
    lat = [50.0] * 100 + [300.0] * 100 + [200.0] * 15 + [54.0] * 85
    result = packet_loss_analysis(_samples(lat), STAGES, [1])
    assert result["recovery"]["recovery_s"] == pytest.approx(1.5)
    assert result["recovery"]["after_s"] == 20.0


def test_never_back_within_10_percent_is_not_recovered() -> None:
    lat = [50.0] * 100 + [300.0] * 100 + [56.0] * 100  # 12 % above baseline
    result = packet_loss_analysis(_samples(lat), STAGES, [1])
    assert result["recovery"] == {
        "recovered": False,
        "recovery_s": None,
        "after_s": 20,
        "window_s": 2.0,
        "min_requests": 10,
        "tolerance": 0.1,
    }


def test_error_share_per_stage_and_failed_requests_leave_the_p99() -> None:
    lat = [50.0] * 300
    failed = {110, 111, 112, 113, 114, 115, 116, 117, 118, 119}  # 10 of the loss stage
    for i in failed:
        lat[i] = 30_000.0  # a timeout: not a latency, an error
    result = packet_loss_analysis(_samples(lat, failed=failed), STAGES, [1])
    shares = [s["error_share"] for s in result["stages"]]
    assert shares == [0.0, 0.1, 0.0]
    assert result["loss_error_share"] == 0.1
    assert result["loss_p99_s"] == pytest.approx(0.05)


def test_no_baseline_stage_means_no_ratio_not_zero() -> None:
    result = packet_loss_analysis(_samples([50.0] * 300), STAGES, [0])
    assert result["baseline_p99_s"] is None
    assert result["p99_ratio"] is None and result["p99_delta_s"] is None
    assert result["recovery"]["recovered"] is False
