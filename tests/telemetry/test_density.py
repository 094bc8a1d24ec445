"""gpu_density known answers: only readings inside in-flight windows count."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from zqbench.telemetry.density import busy_intervals, gpu_density, in_flight

S = 1_000_000_000
EPOCH = 1_700_000_000 * S  # the run's t = 0 in epoch ns


def _samples(*spans: tuple[float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"t_send": [int(a * S) for a, _ in spans], "t_end": [int(b * S) for _, b in spans]}
    )


def _telemetry(points: list[tuple[float, float]], gpu: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "t_epoch_ns": [EPOCH + int(t * S) for t, _ in points],
            "gpu": gpu,
            "util": [u for _, u in points],
        }
    )


def test_busy_while_in_flight_and_idle_in_gaps_is_density_one() -> None:
    """Requests over [0, 1) and [2, 3); the GPU is busy exactly then: density 1.0."""
    samples = _samples((0.0, 1.0), (2.0, 3.0))
    points = [(t / 10, 1.0 if (t < 10 or 20 <= t < 30) else 0.0) for t in range(40)]
    assert gpu_density(_telemetry(points), samples, EPOCH) == 1.0


def test_half_busy_during_requests_is_one_half() -> None:
    samples = _samples((0.0, 1.0))
    points = [(t / 10, 1.0 if t % 2 else 0.0) for t in range(10)] + [(5.0, 1.0)]
    assert gpu_density(_telemetry(points), samples, EPOCH) == 0.5


def test_overlapping_requests_form_one_window() -> None:
    """[0, 2) and [1, 3) overlap: one window [0, 3); the reading at 2.5 s counts."""
    samples = _samples((0.0, 2.0), (1.0, 3.0))
    points = [(0.5, 0.2), (2.5, 0.8), (3.5, 0.0)]
    assert gpu_density(_telemetry(points), samples, EPOCH) == 0.5


def test_several_gpus_are_averaged() -> None:
    samples = _samples((0.0, 1.0))
    both = pd.concat([_telemetry([(0.5, 1.0)], gpu=0), _telemetry([(0.5, 0.5)], gpu=1)])
    assert gpu_density(both, samples, EPOCH) == 0.75


def test_no_reading_in_flight_is_unavailable_not_zero() -> None:
    samples = _samples((0.0, 1.0))
    assert gpu_density(_telemetry([(1.5, 1.0)]), samples, EPOCH) is None
    assert gpu_density(_telemetry([]), samples, EPOCH) is None
    assert gpu_density(_telemetry([(0.5, 1.0)]), _samples(), EPOCH) is None


def test_a_reading_at_a_request_end_is_outside() -> None:
    """[t_send, t_end) is half-open: at t_end the request is no longer in flight."""
    samples = _samples((0.0, 1.0))
    assert gpu_density(_telemetry([(1.0, 1.0), (0.999, 0.25)]), samples, EPOCH) == 0.25


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 200)), min_size=1, max_size=30),
    st.lists(st.integers(-100, 1300), min_size=1, max_size=50),
)
def test_in_flight_matches_any_interval(spans: list[tuple[int, int]], times: list[int]) -> None:
    """The merged windows say "in flight" exactly when some request covers the time."""
    send = np.array([a for a, _ in spans], dtype=np.int64)
    end = send + np.array([d for _, d in spans], dtype=np.int64)
    starts, ends = busy_intervals(send, end)
    assert np.all(starts[1:] > ends[:-1])  # disjoint and sorted
    t = np.array(times, dtype=np.int64)
    expected = [any(a <= x < b for a, b in zip(send, end, strict=True)) for x in t]
    assert in_flight(t, starts, ends).tolist() == expected
