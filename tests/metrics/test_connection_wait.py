"""connection_wait: the target's part of a late send, kept out of schedule_lag (validity)."""

from __future__ import annotations

import numpy as np

from zqbench.metrics.sections.connection_wait import connection_wait_text
from zqbench.metrics.summarize import summarize

from .conftest import MS, build_samples
from .test_summary import run_info


def _late(wait_ms: float, own_ms: float, n: int = 200):
    """n requests each sent `wait_ms + own_ms` late, `wait_ms` of it waiting for a
    connection; every tenth waited, the rest went at once."""
    waited = np.where(np.arange(n) % 10 == 0, wait_ms, 0.0)
    t_intended = (np.arange(n) * 10 * MS).astype(np.int64)
    t_send = t_intended + ((waited + own_ms) * MS).astype(np.int64)
    return build_samples(
        n=n,
        t_intended=t_intended,
        t_send=t_send,
        t_headers=t_send + 2 * MS,
        t_first_token=t_send + 5 * MS,
        t_last_token=t_send + 10 * MS,
        t_end=t_send + 10 * MS,
        connection_wait=(waited * MS).astype(np.int64),
    )


def test_a_wait_for_a_connection_is_not_the_generators_lag() -> None:
    summary = summarize(_late(wait_ms=400, own_ms=1), run=run_info(), slos=[])
    assert summary.validity.ok, summary.validity.reasons
    assert summary.metrics["schedule_lag"].p99 == 0.001  # its own 1 ms, every request
    assert summary.metrics["connection_wait"].p99 == 0.4
    # From t_intended: the wait, its own 1 ms and the 10 ms answer.
    assert summary.metrics["latency_corrected"].max == 0.411
    section = summary.connection_wait
    assert section is not None
    assert (section.waited, section.sent, section.limit_s) == (20, 200, 0.010)
    assert section.p99_s == section.max_s == 0.4
    assert section.peak_in_flight == 1  # 10 ms each, one every 10 ms: never two at once
    assert connection_wait_text(section) == (
        "20 of 200 sends waited for a free connection longer than the schedule-lag limit "
        "(10 ms): connection_wait p99 400 ms, max 400 ms. The target held every connection "
        "zqbench may open (1 request on the wire at most, --max-connections) without "
        "answering, so the wait is the target's: latency_corrected counts it, the "
        "generator's own schedule_lag does not, and the run keeps its SLO verdict"
    )


def test_the_generators_own_lag_is_still_invalid() -> None:
    summary = summarize(_late(wait_ms=0, own_ms=30), run=run_info(), slos=[])
    assert not summary.validity.ok
    assert summary.validity.reasons == [
        "the generator fell behind its schedule: schedule_lag p99 = 30 ms > 10 ms"
    ]
    assert summary.connection_wait is None  # no send waited for a connection


def test_samples_saved_before_the_column_count_the_wait_as_lag() -> None:
    """A run saved before connection_wait existed is judged as it was published."""
    old = _late(wait_ms=400, own_ms=1).drop(columns=["connection_wait"])
    summary = summarize(old, run=run_info(), slos=[])
    assert summary.metrics["schedule_lag"].p99 == 0.401
    assert not summary.validity.ok
    assert summary.metrics["connection_wait"].unavailable == (
        "the samples predate the connection_wait column"
    )
    assert summary.connection_wait is None
