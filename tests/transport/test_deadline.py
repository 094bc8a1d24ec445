"""The request timer (transport/_common.Deadline) against a cancel from outside.

A send whose timeout fires in the instant the run's drain cuts it must end as cut
(CancelledError), not as a timeout: made a timeout, the cut was lost, and a session went on
to send its next turn after the drain, a request with no row (#44 item 2).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from zqbench.transport._common import Deadline, RequestTimeout, Timeouts


async def _victim(deadline: Deadline, entered: asyncio.Event) -> None:
    with deadline:
        entered.set()
        await asyncio.sleep(60)


def _run(cancel_from_outside: bool) -> BaseException:
    async def main() -> BaseException:
        deadline, entered = Deadline(60, Timeouts()), asyncio.Event()
        task = asyncio.create_task(_victim(deadline, entered))
        await entered.wait()
        deadline.fire()  # the timer, due in this same instant
        if cancel_from_outside:
            task.cancel()
        try:
            await task
        except BaseException as e:  # what the victim ended with is the answer
            return e
        raise AssertionError("the victim ended without an error")

    return asyncio.run(main())


def test_its_own_timer_alone_is_a_timeout() -> None:
    error = _run(cancel_from_outside=False)
    assert isinstance(error, RequestTimeout)
    assert str(error) == "no complete response within 60 s"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11's")
def test_a_cancel_from_outside_in_the_same_instant_wins() -> None:
    assert isinstance(_run(cancel_from_outside=True), asyncio.CancelledError)


# ------------------------------------------------------------------ one timer for them all
async def _timed(timeouts: Timeouts, timeout_s: float, work_s: float) -> tuple[str, float]:
    """How a send of `work_s` under a `timeout_s` deadline ended, and after how long."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    try:
        with Deadline(timeout_s, timeouts):
            await asyncio.sleep(work_s)
    except RequestTimeout:
        return "timeout", loop.time() - t0
    return "done", loop.time() - t0


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_each_deadline_fires_at_its_time_never_before(loop_kind: str) -> None:
    """Deadlines of several lengths under one transport's timer: those that ran out end as
    timeouts no earlier than their length (a later, shorter one re-arms the timer), those that
    ended in time never fire, and every bucket is gone at the end."""
    cases = [(0.30, 5.0), (0.05, 5.0), (0.20, 0.01), (0.12, 5.0), (0.05, 5.0), (1.0, 0.02)]

    async def main() -> tuple[list[tuple[str, float]], Timeouts]:
        timeouts = Timeouts()
        tasks = []
        for timeout_s, work_s in cases:
            tasks.append(asyncio.ensure_future(_timed(timeouts, timeout_s, work_s)))
            await asyncio.sleep(0.005)
        return list(await asyncio.gather(*tasks)), timeouts

    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        results, timeouts = uvloop.run(main())
    else:
        results, timeouts = asyncio.run(main())
    for (timeout_s, work_s), (how, took) in zip(cases, results, strict=True):
        if work_s > timeout_s:
            assert how == "timeout" and timeout_s <= took < timeout_s + 2.0, (timeout_s, took)
        else:
            assert how == "done" and took < timeout_s, (timeout_s, took)
    # Each left its bucket as it ended; an empty one stays until its time (the 1 s one's).
    assert all(not bucket for bucket in timeouts.due.values()), timeouts.due


def test_buckets_span_a_ten_thousandth_of_a_long_timeout() -> None:
    """Deadlines a microsecond apart share a bucket; a 600 s timeout's buckets are 60 ms wide,
    so at most 10,000 are ever pending for it."""

    async def main() -> Timeouts:
        timeouts = Timeouts()
        entered = []
        for timeout_s in (600.0, 600.0, 0.5):
            d = Deadline(timeout_s, timeouts)
            d.__enter__()
            entered.append(d)
        for d in entered:
            d.__exit__(None, None, None)
        return timeouts

    timeouts = asyncio.run(main())
    keys = sorted(timeouts.due)
    assert len(keys) == 2, keys  # the two 600 s deadlines in one bucket
    assert keys[0] % 1000 == 0 and keys[1] % 60_000 == 0
    assert all(not bucket for bucket in timeouts.due.values())  # ended: out of their buckets
