"""Helpers the transports share: the per-request deadline and the clock."""

from __future__ import annotations

import asyncio
import sys
import time
from types import TracebackType

from zqbench.transport.base import RequestTimeout


class Deadline:
    """`with Deadline(s):` cancels the current task after `s` seconds and raises RequestTimeout.

    A cancel that comes from outside (the run stopping) still propagates as CancelledError;
    only our own timer becomes a timeout. Works on Python 3.10 (no asyncio.timeout there).
    """

    __slots__ = ("_handle", "_task", "fired", "timeout_s")

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.fired = False

    def __enter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Deadline needs a running task")
        self._task = task
        self._handle = asyncio.get_running_loop().call_later(self.timeout_s, self._fire)
        return self

    def _fire(self) -> None:
        self.fired = True
        self._task.cancel()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._handle.cancel()
        # Our cancel may surface as CancelledError or as whatever a library made of it.
        if self.fired and et is not None:
            if sys.version_info >= (3, 11) and self._task.cancelling():
                self._task.uncancel()
            raise RequestTimeout(f"no complete response within {self.timeout_s:g} s") from None


def now_ns() -> int:
    return time.perf_counter_ns()
