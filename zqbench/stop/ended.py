"""When a `[stop]` rule ended each stage, and the run: written by the watcher in the
parent, read by every worker before each send.

One int64 per stage and one for the run, on time.perf_counter_ns() (CLOCK_MONOTONIC, the
same in every process); 0: not ended. With several worker processes they live in shared
memory (a lock-free RawArray: one writer, and an aligned 8-byte store is never torn on
the platforms zqbench runs on), else in a plain list.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import MutableSequence


class EndedAt:
    def __init__(self, n_stages: int, *, shared: bool) -> None:
        self.n_stages = n_stages
        self._values: MutableSequence[int]
        if shared:
            self._values = mp.get_context("spawn").RawArray("q", n_stages + 1)
        else:
            self._values = [0] * (n_stages + 1)

    def stage(self, index: int) -> int:
        """When stage `index` was ended; 0: it was not."""
        return self._values[index] if 0 <= index < self.n_stages else 0

    def run(self) -> int:
        return self._values[self.n_stages]

    def run_ended(self) -> bool:
        return self._values[self.n_stages] != 0

    def end_stage(self, index: int, at_ns: int) -> None:
        if not self._values[index]:
            self._values[index] = at_ns

    def end_run(self, at_ns: int) -> None:
        if not self._values[self.n_stages]:
            self._values[self.n_stages] = at_ns
