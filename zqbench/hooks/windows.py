"""`WindowTimer`: a hook's thread that switches something on at each window's start and off
at its end, on the run's clock (packet loss at impaired stages, a profiler's capture).

The windows are seconds since t = 0 (`HookContext.start_monotonic_ns`). `stop()` wakes the
thread at once; what is still switched on is the hook's to switch off in its own `stop()`,
so that it happens after an error, Ctrl-C or SIGTERM too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from zqbench.errors import ZqbenchError


class WindowTimer:
    """Calls `switch(True)` at each window's start and `switch(False)` at its end. A
    `ZqbenchError` from `switch` ends the timer; its message goes to `on_error`."""

    def __init__(
        self,
        name: str,
        switch: Callable[[bool], None],
        on_error: Callable[[str], None],
    ) -> None:
        self.name = name
        self.stopping = threading.Event()  # set by stop(): the hook must not switch on again
        self._switch = switch
        self._on_error = on_error
        self._start_ns = 0
        self._thread: threading.Thread | None = None

    def start(self, start_ns: int, windows: Sequence[tuple[float, float]]) -> None:
        self._start_ns = start_ns
        self._thread = threading.Thread(
            target=self._follow, args=(list(windows),), name=self.name, daemon=True
        )
        self._thread.start()

    def seconds(self) -> float:
        """Now, in seconds since t = 0."""
        return (time.perf_counter_ns() - self._start_ns) / 1e9

    def stop(self, join_timeout_s: float) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(join_timeout_s)

    def _follow(self, windows: list[tuple[float, float]]) -> None:
        try:
            for start_s, end_s in windows:
                if self._sleep_until(start_s):
                    return
                self._switch(True)
                if self._sleep_until(end_s):
                    return
                self._switch(False)
        except ZqbenchError as exc:  # reported by the hook's stop(); the run itself goes on
            self._on_error(exc.message)

    def _sleep_until(self, t_s: float) -> bool:
        """Sleep until t_s after t = 0; True when stop() came first."""
        delay = (self._start_ns + int(t_s * 1e9) - time.perf_counter_ns()) / 1e9
        return self.stopping.wait(max(0.0, delay))
