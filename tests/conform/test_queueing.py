"""The hidden-queue rule on exact, made-up steps: which TTFTs count as a wait, and when a
step's waits make a queue (zqbench/conform/queueing.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from zqbench.conform.capacity import Capacity
from zqbench.conform.evidence import Evidence
from zqbench.conform.observations import SlopeStep
from zqbench.conform.queueing import judge

MS = 1_000_000  # ns
CAP = Capacity(4, "advertised by /health `slots`")


def _ex(ttft_ms: float | None, *, status: int = 200, hold_ms: float = 100.0) -> Evidence:
    """An exchange sent at 0 whose first token came at `ttft_ms` (None: refused)."""
    first = None if ttft_ms is None else int(ttft_ms * MS)
    summary = SimpleNamespace(t_first_token=first, error=None)
    end = int(((ttft_ms or 1.0) + (hold_ms if status == 200 else 0)) * MS)
    return Evidence(
        "POST",
        "/v1/messages",
        status=status,
        t_send=0,
        t_end=end,
        parsed=cast(Any, SimpleNamespace(summary=summary)),
    )


def _round(fast: int, slow: int = 0, refused: int = 0) -> list[Evidence]:
    return [_ex(5.0)] * fast + [_ex(150.0)] * slow + [_ex(None, status=529)] * refused


def _judge(*steps: SlopeStep) -> Any:
    lowest = SlopeStep(1, [_round(1)] * 3, 0.3)
    return judge([lowest, *steps], baseline_ms=5.0, capacity=CAP, margin_ms=20.0, share=0.1)


def test_the_threshold_is_twice_the_baseline_plus_half_the_hold() -> None:
    j = _judge()
    assert (j.baseline_ms, j.hold_ms) == (5.0, 100.0)
    assert j.threshold_ms == 2 * 5.0 + 100.0 / 2  # the hold's half beats the 20 ms floor


def test_a_wait_in_every_round_is_a_queue() -> None:
    j = _judge(SlopeStep(8, [_round(4, slow=4)] * 3, 1.0))
    (step8,) = j.queueing
    assert (step8.judged, step8.waited, step8.rounds_waited) == (24, 12, 3)
    assert step8.row()["ttft_p50_ms"] == 5.0 and step8.row()["ttft_p90_ms"] == 150.0


def test_one_stalled_round_is_not_a_queue_though_its_share_is_significant() -> None:
    stalled = [_round(0, slow=4, refused=28), _round(4, refused=28), _round(4, refused=28)]
    j = _judge(SlopeStep(32, stalled, 1.0))
    step32 = j.steps[-1]
    assert (step32.judged, step32.waited, step32.rounds_waited) == (12, 4, 1)
    assert step32.ci_low > 0.1  # 4 of 12: significant as a share ...
    assert not step32.queues  # ... but it did not recur
    assert j.queueing == [] and j.past_capacity


def test_refusals_are_not_waits_and_prove_capacity_was_passed() -> None:
    j = _judge(SlopeStep(16, [_round(4, refused=12)] * 3, 1.0))
    step16 = j.steps[-1]
    assert (step16.admitted, step16.refused, step16.judged, step16.waited) == (12, 36, 12, 0)
    assert j.past_capacity and j.queueing == []
