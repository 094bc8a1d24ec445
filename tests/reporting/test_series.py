"""Time bins for the plots: widths, rates and per-bin nearest-rank percentiles."""

from __future__ import annotations

import numpy as np

from zqbench.outputs import series


def test_bin_width_is_round_and_bounded() -> None:
    """At most 240 bins, never finer than 0.5 s, always a round step."""
    assert series.bin_width(13.0) == 0.5
    assert series.bin_width(600.0) == 5.0
    assert series.bin_width(3600.0) == 15.0
    assert series.bin_width(86400.0) == 600.0


def test_rate_counts_per_second() -> None:
    """10 + 10 events in the first two 0.5 s bins, then 3 and 2; NaN is ignored."""
    times = np.concatenate(
        [np.linspace(0, 0.45, 10), np.linspace(0.5, 0.95, 10), [1.0, 1.2, 1.4, 1.6, 1.8], [np.nan]]
    )
    edges = series.edges(2.0, 0.5)
    assert series.rate(times, edges).tolist() == [20.0, 20.0, 6.0, 4.0]


def test_percentile_bands_are_nearest_rank_per_bin() -> None:
    """Bin 0 holds 1..100, bin 1 holds 1000..1009; bin 2 is empty (NaN, not 0)."""
    times = np.concatenate([np.full(100, 0.2), np.full(10, 1.5)])
    values = np.concatenate([np.arange(100, 0, -1), np.arange(1000, 1010)]).astype(float)
    levels = series.percentile_bands(times, values, series.edges(3.0, 1.0))
    assert levels["p50"][:2].tolist() == [50.0, 1004.0]
    assert levels["p99"][:2].tolist() == [99.0, 1009.0]
    assert levels["max"][:2].tolist() == [100.0, 1009.0]
    assert np.isnan(levels["p50"][2])


def test_in_flight_counts_open_requests() -> None:
    sends, ends = np.array([0.0, 1.0, 5.0]), np.array([2.0, 3.0, 6.0])
    assert series.in_flight(sends, ends, np.array([0.5, 1.5, 2.5, 4.0, 5.5])).tolist() == [
        1,
        2,
        1,
        0,
        1,
    ]


def test_shares_sum_to_one_per_nonempty_bin() -> None:
    times = np.array([0.1, 0.2, 0.3, 0.4, 1.5])
    keys = np.array(["200", "200", "503", "200", "503"], dtype=object)
    shares = series.shares(times, keys, series.edges(3.0, 1.0), ["200", "503"])
    assert shares[:, 0].tolist() == [0.75, 0.25]
    assert shares[:, 1].tolist() == [0.0, 1.0]
    assert shares[:, 2].tolist() == [0.0, 0.0]
