"""The "profile" section of summary.json, from the capture and the run's samples.

artifacts        every file under <run>/profile/ (traces, .nsys-rep, .ncu-rep, CSVs)
top_ops          torch: ops by self time in the trace; nsys: kernels by `nsys stats`
ranges           nsys: the NVTX range summary (per-request and per-step ranges)
slowest          the requests sent inside the capture window with the longest TTFT,
                 by the x-request-id zqbench sent ("zq-<request_id>"), and whether
                 (and where, for torch) the capture holds their range
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from zqbench.profile import nsys_stats, tools, torch_trace
from zqbench.profile.window import CaptureLog
from zqbench.samples.writer import PARQUET_NAME
from zqbench.summary import Profile, ProfileOp, ProfileRequest

PROFILE_DIR = "profile"  # inside the run folder: every file the capture leaves
_STATS_TIMEOUT_S = 600.0
_LATE_S = 0.25  # a capture that starts later than this into its window gets a note


def build(
    tool: str, log: CaptureLog, out_dir: Path, tool_path: str | None, *, slowest: int
) -> Profile:
    profile_dir = out_dir / PROFILE_DIR
    notes = [*log.errors, *_timing_notes(log)]
    top: list[ProfileOp] = []
    ranges: list[ProfileOp] = []
    in_trace: dict[str, float] = {}
    first_us = 0.0
    traces = sorted(profile_dir.rglob("*.json"))
    if tool == "torch":
        if not traces:
            notes.append("no torch trace was written (did /stop_profile run?)")
        events = [e for path in traces for e in torch_trace.load_events(path)]
        top = torch_trace.top_ops(events)
        found = torch_trace.request_ranges(events)
        in_trace, first_us = found.requests, found.first_ts_us
    elif tool == "nsys":
        top, ranges = _nsys_tables(profile_dir, tool_path, notes)
    artifacts = sorted(str(p.relative_to(out_dir)) for p in profile_dir.rglob("*") if p.is_file())
    if tool in ("nsys", "ncu") and not any(a.endswith(f".{tool}-rep") for a in artifacts):
        notes.append(f"no .{tool}-rep report was written; see the server's log")
    return Profile(
        tool=tool,  # type: ignore[arg-type]  # checked by ProfileJob's caller
        window_start=log.window[0],
        window_end=log.window[1],
        started_at=log.started_at,
        stopped_at=log.stopped_at,
        artifacts=artifacts,
        request_ranges=len(in_trace),
        top_ops=top,
        ranges=ranges,
        slowest=_slowest(out_dir, log, in_trace, first_us, slowest, traced=tool == "torch"),
        notes=notes,
    )


def _timing_notes(log: CaptureLog) -> list[str]:
    """A capture that missed its window, or began late in it, says so."""
    start, end = log.window
    if log.started_at is None and not log.errors:
        return [f"the run ended before the capture window ({start:g} s to {end:g} s)"]
    if log.started_at is not None and log.started_at - start > _LATE_S:
        late = log.started_at - start
        return [f"the capture started {late:.2f} s into its window (/start_profile was slow)"]
    return []


def _nsys_tables(
    profile_dir: Path, nsys: str | None, notes: list[str]
) -> tuple[list[ProfileOp], list[ProfileOp]]:
    """`nsys stats` on the capture (when nsys and a report are there), then its CSVs."""
    report = next(iter(sorted(profile_dir.glob("*.nsys-rep"))), None)
    base = profile_dir / "nsys_stats"
    if report is not None and nsys is not None:
        problem = _run_stats(nsys, report, base)
        if problem:
            notes.append(problem)
    kernels = nsys_stats.read_summary(nsys_stats.report_csv(base, "cuda_gpu_kern_sum"))
    return kernels, nsys_stats.read_summary(nsys_stats.report_csv(base, "nvtx_sum"))


def _run_stats(nsys: str, report: Path, base: Path) -> str | None:
    """None, or why `nsys stats` failed (one line)."""
    cmd = tools.nsys_stats_command(nsys, report, base)
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=_STATS_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nsys stats failed: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"nsys stats exited with code {done.returncode}: {last}"
    return None


def _slowest(
    out_dir: Path,
    log: CaptureLog,
    in_trace: dict[str, float],
    first_us: float,
    limit: int,
    *,
    traced: bool,
) -> list[ProfileRequest]:
    """The requests sent inside the capture window, slowest TTFT first."""
    path = out_dir / PARQUET_NAME
    if log.started_at is None or not path.is_file():
        return []
    stopped = log.stopped_at if log.stopped_at is not None else float("inf")
    df = pd.read_parquet(path, columns=["request_id", "t_send", "t_first_token"])
    df = df[df["t_first_token"].notna()]
    sent_s = df["t_send"] / 1e9
    df = df[(sent_s >= log.started_at) & (sent_s < stopped)]
    df = df.assign(ttft=(df["t_first_token"] - df["t_send"]) / 1e9)
    rows = []
    for row in df.nlargest(limit, "ttft").itertuples():
        rid = f"zq-{int(row.request_id)}"
        start = in_trace.get(rid)
        rows.append(
            ProfileRequest(
                request_id=rid,
                ttft=round(float(row.ttft), 6),
                range_name=f"{torch_trace.REQUEST_PREFIX}{rid}",
                in_trace=(start is not None) if traced else None,
                trace_start_ms=None if start is None else round((start - first_us) / 1e3, 3),
            )
        )
    return rows
