"""`executor = "trace"`: replay a trace file's requests at its own times, open loop. Its
`[load]` keys, with an example, are in docs/workloads.md#trace-replay.

Request i is the file's row i, sent at its timestamp (less the first row's) times
`time_scale`; `--rate-scale R` divides `time_scale` by R and `--duration-scale` cuts the
replay. The rows' contents are the trace request source's (`zqbench.sources.trace`): this
module decides only when each row goes. Workers take the rows round-robin, as the
arrival-rate executors deal their arrivals.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from zqbench.errors import OptionError, ScenarioError, UsageError
from zqbench.load.arrival_rate import (
    CHUNK,
    MAX_PLANNED_REQUESTS,
    Chunk,
    send_open_loop,
    too_many,
)
from zqbench.load.bounds import MAX_PROMPT_TOKENS
from zqbench.load.executor import (
    Driver,
    Executor,
    LoadPlan,
    ScheduledWork,
    Stage,
    graceful_stop,
    scheduled_missing,
    stage_spans,
)
from zqbench.load.trace_file import (
    DEFAULT_BLOCK_TOKENS,
    TRACE_FORMATS,
    TraceError,
    TraceIndex,
    scaled_ns,
    scan,
    stat_cached,
)
from zqbench.strict_toml import Table

MIN_REPLAY_S = 0.001  # a trace scaled shorter than this is a typo, not a replay


@dataclass(frozen=True, slots=True)
class TraceLoad:
    path: str  # absolute
    format: str  # as the scenario says: auto, mooncake or tokens
    time_scale: float
    block_tokens: int
    cut_s: float | None  # replay only this long (the scenario's duration); None: all of it
    graceful_stop_s: float
    executor: str = "trace"

    def index(self) -> TraceIndex:
        """The file's index, read once per process while the file stays as it was."""
        return trace_index(self.path, self.format, self.block_tokens)

    def times_ns(self) -> np.ndarray:
        """Each row's intended time (ns from t = 0) within the cut: int64, non-decreasing,
        read-only (computed once per process)."""
        times = _scaled_times(self.path, self.format, self.block_tokens, self.time_scale)
        if self.cut_s is not None:
            times = times[: int(np.searchsorted(times, round(self.cut_s * 1e9), "right"))]
        return times

    @property
    def duration_s(self) -> float:
        last = float(self.index().times_ns[-1]) * self.time_scale / 1e9
        return last if self.cut_s is None else min(last, self.cut_s)

    @property
    def stages(self) -> tuple[Stage, ...]:
        return (Stage(self.duration_s, self._mean_rate(len(self.times_ns())), "trace"),)

    def _mean_rate(self, rows: int) -> float:
        return rows / self.duration_s if self.duration_s > 0 else 0.0

    def plan(self, n_workers: int, seed: int) -> LoadPlan:
        times = self.times_ns()
        if len(times) > MAX_PLANNED_REQUESTS:
            raise UsageError(
                f"the load asks for {len(times):,} requests (the trace's rows replayed); "
                f"{too_many(MAX_PLANNED_REQUESTS)}replay a part of it ([load] duration, or "
                "--duration-scale), or split the trace into several runs"
            )
        works: list[Any] = [
            # One worker replays the times as they are; more take copies of their rows.
            TraceWork(times if n_workers == 1 else times[w::n_workers].copy(), w, n_workers)
            for w in range(n_workers)
        ]
        end = round(self.duration_s * 1e9)
        return LoadPlan(
            works=works,
            offered=len(times),
            offered_rate=self._mean_rate(len(times)),
            stages=stage_spans(self.stages, [(0, end)], rates=True),
            loop="open",
        )

    def scaled(self, rate_scale: float, duration_scale: float, label: str) -> TraceLoad:
        cut = self.cut_s / rate_scale if self.cut_s is not None else None
        if duration_scale != 1.0:
            cut = self.duration_s / rate_scale * duration_scale
        out = dataclasses.replace(self, time_scale=self.time_scale / rate_scale, cut_s=cut)
        if self.duration_s > 0 and not out.duration_s >= MIN_REPLAY_S:
            # Shorter, its rows all go at once and its mean rate is past any float (an
            # internal error once, writing summary.json).
            option = "duration_scale" if duration_scale != 1.0 else "rate_scale"
            raise OptionError(
                option,
                f"replays the trace's {self.duration_s:.3g} s in {out.duration_s:.3g} s; a "
                f"replay lasts at least {MIN_REPLAY_S * 1e3:g} ms",
                value=f"{duration_scale if option == 'duration_scale' else rate_scale:g}",
            )
        return out

    def with_arrivals(self, arrivals: str | None, burstiness: float | None) -> TraceLoad:
        if arrivals is not None or burstiness is not None:
            name = "arrivals" if arrivals is not None else "burstiness"
            raise OptionError(
                name, "does not apply to a trace: its rows' timestamps are its arrivals"
            )
        return self

    def at_constant_rate(self, rate: float, duration_s: float, name: str) -> TraceLoad:
        raise OptionError(
            "scenario",
            "replays a trace at its own times; a sweep needs an arrival-rate or vus executor "
            "(use --rate-scale to replay the trace faster)",
        )

    def concurrency_guess(self) -> int:
        times = self.times_ns()
        busiest = 0  # the most rows in a second, a piece at a time (a trace may be long)
        for a in range(0, len(times), CHUNK):
            ends = np.searchsorted(times, times[a : a + CHUNK] + 1_000_000_000, "left")
            busiest = max(busiest, int(np.max(ends - np.arange(a, a + len(ends)))))
        return int(busiest * 0.1) + 4  # times a guessed 100 ms latency (Little's law)


@functools.lru_cache(maxsize=2)
def _scaled_times(path: str, fmt: str, block_tokens: int, time_scale: float) -> np.ndarray:
    times = trace_index(path, fmt, block_tokens).times_ns
    return times if time_scale == 1.0 else scaled_ns(times, time_scale)


# (path, format, block_tokens) -> the file's TraceIndex
trace_index = stat_cached(scan, "trace", TraceError, maxsize=2)


@dataclass(frozen=True, slots=True)
class TraceWork(ScheduledWork):
    """One worker's rows: request ids first_id, first_id + step, ...; their times (ns)."""

    wire_name: ClassVar[str] = "trace"
    wire_arrays: ClassVar[dict[str, str]] = {"times_ns": "int64"}

    times_ns: np.ndarray  # int64, non-decreasing
    first_id: int
    step: int

    async def run(self, driver: Driver) -> None:
        await send_open_loop(driver, self._chunks())

    def _chunks(self) -> Iterator[Chunk]:
        for a in range(0, len(self.times_ns), CHUNK):
            times = self.times_ns[a : a + CHUNK].tolist()
            first = self.first_id + a * self.step
            yield (
                times,
                list(range(first, first + len(times) * self.step, self.step)),
                [0] * len(times),
            )

    def request_ids(self) -> np.ndarray:
        return self.first_id + self.step * np.arange(len(self.times_ns), dtype=np.int64)

    def missing(self, received_ids: np.ndarray) -> tuple[int, float | None, float | None]:
        return scheduled_missing(self.request_ids(), self.times_ns, received_ids)


def parse(t: Table, folder: Path) -> TraceLoad:
    name = t.string("trace") or ""
    if not name:
        raise t.fail("trace", "must name the trace file")
    path = folder / name
    if not path.is_file():
        raise t.fail("trace", f"names no file (from {folder}); give the trace's path")
    time_scale = t.number("time_scale", strict=True) if t.has("time_scale") else 1.0
    blocks = t.integer("block_tokens", minimum=1) if t.has("block_tokens") else None
    if blocks is not None and blocks > MAX_PROMPT_TOKENS:
        raise t.fail(
            "block_tokens", f"must be at most {MAX_PROMPT_TOKENS:,} (past any model's context)"
        )
    fmt = t.choice("format", TRACE_FORMATS, "auto") or "auto"
    if blocks is not None and fmt == "tokens":
        raise ScenarioError(
            f"{t.label}: {t.key('block_tokens')} applies to a mooncake trace (hash_ids); "
            'format = "tokens" has none'
        )
    load = TraceLoad(
        path=str(path.resolve()),
        format=fmt,
        time_scale=time_scale,
        block_tokens=blocks or DEFAULT_BLOCK_TOKENS,
        cut_s=t.duration("duration", positive=True) if t.has("duration") else None,
        graceful_stop_s=graceful_stop(t),
    )
    if time_scale != 1.0:
        # The file is read now (once per process: the plan finds its index ready), so a
        # time_scale that replays it in nothing is the scenario's error, as --rate-scale's
        # is the flag's: 1e-308 was exit 5 (an infinite mean rate in summary.json).
        span_s = float(load.index().times_ns[-1]) / 1e9
        if span_s > 0 and not span_s * time_scale >= MIN_REPLAY_S:
            raise t.fail(
                "time_scale",
                f"replays the trace's {span_s:.3g} s in {span_s * time_scale:.3g} s; a replay "
                f"lasts at least {MIN_REPLAY_S * 1e3:g} ms",
            )
    return load


EXECUTOR = Executor(
    name="trace",
    keys=("trace", "format", "time_scale", "block_tokens", "duration", "graceful_stop"),
    required=("trace",),
    parse=parse,
)
