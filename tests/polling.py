"""Wait for a condition, not for a time: what a test needs on a busy machine.

A test that sleeps a fixed time and then counts what happened assumes the machine ran the
code under test during that sleep; on two busy cores it may not have. `wait_for` polls the
condition itself, up to a deadline far past what an idle machine needs, and says what it
waited for when the deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], what: str, *, timeout_s: float = 30.0, every_s: float = 0.02
) -> T:
    """Poll `condition` until it returns a true value (which is returned), or fail naming
    `what` once `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)
