"""The request timer (transport/_common.Deadline) against a cancel from outside.

A send whose timeout fires in the instant the run's drain cuts it must end as cut
(CancelledError), not as a timeout: made a timeout, the cut was lost, and a session went on
to send its next turn after the drain, a request with no row (#44 item 2).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from zqbench.transport._common import Deadline, RequestTimeout


async def _victim(deadline: Deadline, entered: asyncio.Event) -> None:
    with deadline:
        entered.set()
        await asyncio.sleep(60)


def _run(cancel_from_outside: bool) -> BaseException:
    async def main() -> BaseException:
        deadline, entered = Deadline(60), asyncio.Event()
        task = asyncio.create_task(_victim(deadline, entered))
        await entered.wait()
        deadline._fire()  # the timer, due in this same instant
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
