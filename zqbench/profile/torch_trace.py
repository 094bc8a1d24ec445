"""What a torch.profiler (Kineto) Chrome trace shows: its top ops and its request ranges.

A request's range is a "user_annotation" event named "request <x-request-id>"
(reference_server/trace.py); every other complete ("X") CPU op or GPU kernel counts
toward the top-ops table by its self time (its duration less its children's on the same
thread), so a range that encloses others does not count them twice.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zqbench.summary import ProfileOp

REQUEST_PREFIX = "request "
# Ranges, not ops: the requests' and the profiler's own, which spans the whole capture.
_NOT_OPS = (REQUEST_PREFIX, "PyTorch Profiler", "ProfilerStep")


@dataclass(frozen=True)
class TraceRanges:
    first_ts_us: float  # the trace's first event
    requests: dict[str, float]  # x-request-id -> start (us, trace clock)


def load_events(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def request_ranges(events: list[dict[str, Any]]) -> TraceRanges:
    first = min((float(e.get("ts", 0.0)) for e in events), default=0.0)
    requests = {
        str(e["name"])[len(REQUEST_PREFIX) :]: float(e.get("ts", 0.0))
        for e in events
        if str(e.get("name", "")).startswith(REQUEST_PREFIX)
    }
    return TraceRanges(first, requests)


def top_ops(events: list[dict[str, Any]], limit: int = 15) -> list[ProfileOp]:
    """The ops (and kernels) by self time, request ranges and the profiler's own aside."""
    calls: dict[str, int] = defaultdict(int)
    self_us: dict[str, float] = defaultdict(float)
    for event, own in _self_times(events):
        name = str(event.get("name", ""))
        if name.startswith(_NOT_OPS) or event.get("cat") == "python_function":
            continue
        calls[name] += 1
        self_us[name] += own
    ranked = sorted(self_us, key=lambda n: -self_us[n])[:limit]
    return [ProfileOp(name=n, calls=calls[n], total_ms=round(self_us[n] / 1e3, 3)) for n in ranked]


def _self_times(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """Each event with its duration less its direct children's (per thread, by nesting)."""
    out: list[tuple[dict[str, Any], float]] = []
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if not str(e.get("name", "")).startswith(REQUEST_PREFIX):  # overlap: not nested
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for thread in by_thread.values():
        thread.sort(key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
        stack: list[list[Any]] = []  # [event, end, children's time]
        for e in thread:
            ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
            while stack and stack[-1][1] <= ts:
                done = stack.pop()
                out.append((done[0], float(done[0].get("dur", 0)) - done[2]))
            if stack:
                stack[-1][2] += dur
            stack.append([e, ts + dur, 0.0])
        out.extend((d[0], float(d[0].get("dur", 0)) - d[2]) for d in stack)
    return out
