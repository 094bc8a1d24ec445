"""Per-request ranges and the torch-profiler capture behind /start_profile, /stop_profile.

A request takes part in many batched engine steps, interleaved with other requests, so
its range cannot be a pushed (nested) range. It is a start/end pair instead:

    NVTX        nvtx.start_range / end_range (domain "refserver"): Nsight shows it on its
                own row, however the requests overlap
    torch       record_function enter/exit handles (the op behind
                torch.profiler.record_function), which the profiler records as one
                "user_annotation" event each, overlapping ones included

Each is named "request <id>", the id being the x-request-id the client sent (zqbench's
"zq-<n>", as in samples.parquet), else the server's own. A range opened while no torch
profiler runs is not recorded; one still open when the profiler stops is cut there
("finished": false in the trace). So a capture holds only the ranges inside its window.

`TorchCapture`: set REFSERVER_TORCH_PROFILER_DIR (or vLLM's VLLM_TORCH_PROFILER_DIR, so
the same `zqbench profile torch` drives both) and the profiling routes run
torch.profiler (CPU ops; CUDA kernels too on a GPU) instead of cudaProfilerStart/Stop,
and /stop_profile writes a Chrome/Perfetto trace into that folder.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

try:
    import nvtx

    _NVTX: Any = nvtx
except ImportError:  # pragma: no cover - nvtx is an optional extra
    _NVTX = None

try:
    import torch

    _ENTER: Any = torch.ops.profiler._record_function_enter_new
    _EXIT: Any = torch.ops.profiler._record_function_exit
except (ImportError, AttributeError):  # the sim engine runs without torch
    _ENTER = _EXIT = None

log = logging.getLogger("reference_server")

# Set while a TorchCapture records. Not torch's own "profiler enabled" flag: that one is
# per thread, and the ranges are opened on the engine thread.
_capturing = threading.Event()

PROFILER_DIR_ENV = ("REFSERVER_TORCH_PROFILER_DIR", "VLLM_TORCH_PROFILER_DIR")
# Each /stop_profile writes a trace (megabytes): only this server's newest ones are kept, so
# a client cycling the routes (any client, without --api-key) cannot fill the disk.
KEEP_ENV = "REFSERVER_TORCH_PROFILER_KEEP"
KEEP_DEFAULT = 8


def range_name(trace_id: str) -> str:
    return f"request {trace_id}"


class RequestRange:
    """One request's range: opened at admission, closed when it ends in any way."""

    __slots__ = ("_nvtx", "_torch")

    def __init__(self, trace_id: str) -> None:
        name = range_name(trace_id)
        self._nvtx: Any = None
        self._torch: Any = None
        # A range is an annotation: whatever goes wrong, the engine goes on without it.
        try:
            if _NVTX is not None:
                self._nvtx = _NVTX.start_range(message=name, domain="refserver")
            # Only while a profiler records: entering costs a dispatcher call otherwise.
            if _ENTER is not None and _capturing.is_set():
                self._torch = _ENTER(name, None)
        except Exception:  # pragma: no cover - a profiler's own failure
            log.debug("request range %s not opened", name, exc_info=True)

    def close(self) -> None:
        nvtx_range, torch_range = self._nvtx, self._torch
        self._nvtx = self._torch = None
        try:
            if nvtx_range is not None:
                _NVTX.end_range(nvtx_range)
            if torch_range is not None:
                _EXIT(torch_range)
        except Exception:  # pragma: no cover - a profiler's own failure
            log.debug("request range not closed", exc_info=True)


class TorchCapture:
    """torch.profiler between /start_profile and /stop_profile; traces land in `out_dir`."""

    def __init__(self, out_dir: Path, keep: int = KEEP_DEFAULT) -> None:
        if keep < 1:
            raise ValueError(f"{KEEP_ENV} must be at least 1, not {keep}")
        self.out_dir = out_dir
        self.keep = keep
        self._prof: Any = None
        self._lock = threading.Lock()
        self._count = 0
        self._written: list[Path] = []  # this server's traces, oldest first

    @classmethod
    def from_env(cls) -> TorchCapture | None:
        raw = os.environ.get(KEEP_ENV, str(KEEP_DEFAULT))
        try:
            keep = int(raw)
        except ValueError:
            raise ValueError(f"{KEEP_ENV} must be a whole number, not {raw!r}") from None
        for name in PROFILER_DIR_ENV:
            value = os.environ.get(name)
            if value:
                capture = cls(Path(value), keep)
                capture.warm_up()
                return capture
        return None

    def warm_up(self) -> None:
        """Import and initialise the profiler now, at startup: the first start otherwise
        takes seconds, and the capture would begin that late into its window."""
        if _ENTER is None:
            return
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], experimental_config=_all_threads()):
            pass

    def start(self) -> None:
        if _ENTER is None:
            raise ValueError(
                "the torch profiler needs torch; install it or unset " + PROFILER_DIR_ENV[0]
            )
        from torch.profiler import ProfilerActivity, profile

        with self._lock:
            if self._prof is not None:
                raise ValueError("a torch profile is already running; POST /stop_profile first")
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            self._prof = profile(activities=activities, experimental_config=_all_threads())
            self._prof.start()
            _capturing.set()

    def stop(self) -> Path:
        with self._lock:
            prof, self._prof = self._prof, None
            if prof is None:
                raise ValueError("no torch profile is running; POST /start_profile first")
            _capturing.clear()
            prof.stop()
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._count += 1
            path = self.out_dir / f"trace-{os.getpid()}-{self._count}.pt.trace.json"
            prof.export_chrome_trace(str(path))
            self._written.append(path)
            while len(self._written) > self.keep:
                self._written.pop(0).unlink(missing_ok=True)
            return path


def _all_threads() -> Any:
    """Record every thread's ops (the engine's, not only the caller's), where torch can."""
    from torch._C._profiler import _ExperimentalConfig

    try:
        return _ExperimentalConfig(profile_all_threads=True)
    except TypeError:  # an older torch: the routes' thread only
        return None
