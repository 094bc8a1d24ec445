"""The profilers' command lines. Nothing here runs them.

nsys records only between cudaProfilerStart and cudaProfilerStop (the server's
/start_profile and /stop_profile), with NVTX ranges traced so that each request's range
("request zq-17") sits on the timeline next to its kernels. ncu profiles kernels inside
the requests' NVTX ranges only (`--nvtx-include "regex:refserver@request .*"`), within the same
profiler-API window, skipping and counting launches as asked.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from zqbench.errors import UsageError

TOOLS = ("nsys", "ncu", "torch")

_REMEDY = {
    "nsys": "install NVIDIA Nsight Systems (the CUDA toolkit's nsys, or "
    "https://developer.nvidia.com/nsight-systems) and put nsys on PATH, "
    "or use `zqbench profile torch`",
    "ncu": "install NVIDIA Nsight Compute (the CUDA toolkit's ncu, or "
    "https://developer.nvidia.com/nsight-compute) and put ncu on PATH, "
    "or use `zqbench profile torch`",
}


@dataclass(frozen=True)
class NcuLimits:
    launch_skip: int = 0
    launch_count: int = 20  # a full set replays each kernel many times: keep it bounded
    section_set: str = "full"


def find_tool(tool: str) -> str:
    """The profiler's path on PATH; UsageError (exit 2) naming it and how to get it."""
    path = shutil.which(tool)
    if path is None:
        raise UsageError(f"{tool} not found on PATH; {_REMEDY[tool]}")
    return path


def nsys_command(nsys: str, report_base: Path, server: Sequence[str]) -> list[str]:
    """`nsys profile` of the server, recording only inside the profiler-API window."""
    return [
        nsys,
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--sample=none",  # no CPU sampling: the timeline, not a CPU profile
        "--trace-fork-before-exec=true",  # servers that fork their engine (vLLM)
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--cuda-graph-trace=node",
        "--force-overwrite=true",
        f"--output={report_base}",
        *server,
    ]


def ncu_command(ncu: str, report_base: Path, server: Sequence[str], limits: NcuLimits) -> list[str]:
    """`ncu` on the server: kernels inside request ranges, in the profiler-API window."""
    return [
        ncu,
        "--profile-from-start=off",  # cudaProfilerStart (/start_profile) opens the window
        "--nvtx",
        "--nvtx-include=regex:refserver@request .*",  # start/end ranges: no trailing /
        f"--launch-skip={limits.launch_skip}",
        f"--launch-count={limits.launch_count}",
        f"--set={limits.section_set}",
        "--target-processes=all",
        "--force-overwrite",
        f"--export={report_base}",
        *server,
    ]


def nsys_stats_command(nsys: str, report: Path, csv_base: Path) -> list[str]:
    """The kernel and NVTX range summaries of a capture, as CSV files beside it."""
    return [
        nsys,
        "stats",
        "--report=cuda_gpu_kern_sum,nvtx_sum",
        "--format=csv",
        "--force-export=true",
        f"--output={csv_base}",
        str(report),
    ]
