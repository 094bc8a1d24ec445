"""Tests whose assertions are about time run alone, the other workers waiting.

The suite runs three pytest-xdist workers on two cores, and each of them starts servers: a
test that asserts a latency bound, a TTFT comparison or a count of fast refusals then
measures its neighbours' load as much as the code under test. Two CI runs on a loaded
runner (21 min for a suite of 8) failed seven such tests, none of them in the same way.

Every test holds a shared lock on one file while it runs; a `quiet` test (the marker, or
`cpu_share(exclusive=True)` around a module fixture's runs) holds it exclusively, so it
starts once the running tests end and no other starts until it does. A second lock, the
turnstile, is taken briefly before either: a waiting quiet test holds it, so the other
workers cannot keep the shared lock taken in turns and starve it (flock has no writer
preference). The files are per test run (xdist's run id), so two suites on one machine do
not wait for each other.

A fixture that takes the exclusive lock must be module- or session-scoped: those are set up
before the test's own shared lock is taken, so a worker never waits for itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _lock_paths() -> tuple[Path, Path] | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:  # one process (-n 0): nothing runs beside the test
        return None
    base = Path(tempfile.gettempdir()) / f"zqbench-tests-{os.getuid()}-{run}"
    return base.with_suffix(".turnstile"), base.with_suffix(".share")


@contextlib.contextmanager
def cpu_share(*, exclusive: bool) -> Iterator[None]:
    """Hold the machine shared (every test) or alone (a quiet one) for the block."""
    paths = _lock_paths()
    if paths is None:
        yield
        return
    turnstile, share = paths
    with open(turnstile, "a+b") as gate, open(share, "a+b") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
