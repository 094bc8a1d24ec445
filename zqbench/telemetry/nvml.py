"""NvmlSampler: GPU utilization, memory, SM clock, power, temperature and throttle reasons.

A RunHook whose thread polls every GPU through NVML every `interval_s` (default 100 ms,
10 Hz) on an absolute schedule, from t = 0 until the run stops. On stop it writes
telemetry.gpu.parquet, computes gpu_density from the run's samples and flags thermal or
power throttling.

The NVML module is a parameter (`pynvml` in real use, a fake in tests), so the sampler runs
and is tested on machines without a GPU. A field the device does not support is null.
NVML's utilization is the busy share over the driver's last sample period (1/6 s to 1 s,
depending on the GPU), so polling faster than 10 Hz adds no information.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from zqbench.errors import OptionError
from zqbench.hooks.contract import HookContext, HookResult
from zqbench.telemetry import table
from zqbench.telemetry.sampler import add_gpu_density, poll_every

INTERVAL_S = 0.1
NVML_CLOCK_SM = 1  # nvmlClockType_t
NVML_TEMPERATURE_GPU = 0  # nvmlTemperatureSensors_t
# nvmlClocksEventReasons bits (nvml.h): why the clocks are below their maximum.
THERMAL_REASONS = 0x20 | 0x40  # SwThermalSlowdown, HwThermalSlowdown
POWER_REASONS = 0x04 | 0x80  # SwPowerCap, HwPowerBrakeSlowdown
HW_SLOWDOWN = 0x08  # HwSlowdown: thermal or power, the hardware does not say which
THROTTLE_KINDS = {"thermal": THERMAL_REASONS, "power": POWER_REASONS, "hw_slowdown": HW_SLOWDOWN}


def is_local(host: str) -> bool:
    """Whether `host` is this machine (so its GPUs are the target's)."""
    if host in ("", "localhost"):
        return True
    try:
        addr = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return False
    if addr.is_loopback:
        return True
    try:  # one of this machine's own addresses: binding to it succeeds
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((str(addr), 0))
        return True
    except OSError:
        return False


class NvmlSampler:
    name = "nvml"

    def __init__(self, nvml: Any, *, interval_s: float = INTERVAL_S, primary: bool = True) -> None:
        """`nvml`: an initialised pynvml-like module; `primary`: its density is gpu_density."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.nvml = nvml
        self.interval_s = interval_s
        self.primary = primary
        self._error = getattr(nvml, "NVMLError", Exception)
        self._rows: dict[str, list[Any]] = {f.name: [] for f in table.GPU_SCHEMA}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: HookContext | None = None
        self._anchor_ns = 0  # epoch = anchor + perf_counter_ns
        self._devices: list[tuple[int, Any, str]] = []
        self._failures: list[str] = []
        self._closed = False

    @classmethod
    def open(cls, interval_s: float = INTERVAL_S) -> NvmlSampler:
        """pynvml, initialised; UsageError (exit 2) when there is no NVML or no GPU."""
        sampler = cls.try_open(interval_s)
        if sampler is None:
            raise OptionError(
                "telemetry",
                "NVML did not start (no NVIDIA driver or GPU here); "
                "use prometheus:URL for a remote GPU",
                value="nvml",
            )
        return sampler

    @classmethod
    def try_open(cls, interval_s: float = INTERVAL_S) -> NvmlSampler | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() < 1:
                pynvml.nvmlShutdown()
                return None
        except Exception:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return None
        return cls(pynvml, interval_s=interval_s)

    def start(self, ctx: HookContext) -> None:
        self._ctx = ctx
        nv = self.nvml
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            name = self._maybe(nv.nvmlDeviceGetName, handle)
            self._devices.append((i, handle, name.decode() if isinstance(name, bytes) else name))
        self._anchor_ns = time.time_ns() - time.perf_counter_ns()
        self._thread = threading.Thread(target=self._loop, name="zqbench-nvml", daemon=True)
        self._thread.start()

    def _maybe(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One NVML query; None when the device does not support it."""
        try:
            return fn(*args)
        except self._error:
            return None

    def _reasons(self, handle: Any) -> int | None:
        nv = self.nvml
        getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        return None if getter is None else self._maybe(getter, handle)

    def _read(self) -> None:
        nv = self.nvml
        for index, handle, _ in self._devices:
            now = time.perf_counter_ns()
            rates = self._maybe(nv.nvmlDeviceGetUtilizationRates, handle)
            mem = self._maybe(nv.nvmlDeviceGetMemoryInfo, handle)
            power_mw = self._maybe(nv.nvmlDeviceGetPowerUsage, handle)
            row = {
                "t_epoch_ns": self._anchor_ns + now,
                "gpu": index,
                "util": None if rates is None else rates.gpu / 100.0,
                "mem_util": None if rates is None else rates.memory / 100.0,
                "mem_used_bytes": None if mem is None else int(mem.used),
                "mem_total_bytes": None if mem is None else int(mem.total),
                "sm_clock_mhz": self._maybe(nv.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_SM),
                "power_w": None if power_mw is None else power_mw / 1000.0,
                "temp_c": self._maybe(nv.nvmlDeviceGetTemperature, handle, NVML_TEMPERATURE_GPU),
                "throttle_reasons": self._reasons(handle),
                "source": "nvml",
            }
            for key, value in row.items():
                self._rows[key].append(value)

    def _loop(self) -> None:
        poll_every(self.interval_s, self._stopping, self._poll)

    def _poll(self) -> None:
        try:
            self._read()
        except Exception as exc:  # a GPU fell off the bus: stop sampling, report it
            self._failures.append(f"{type(exc).__name__}: {exc}")
            self._stopping.set()

    def stop(self) -> HookResult:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if not self._closed:
            self._closed = True
            self._maybe(self.nvml.nvmlShutdown)
        result = HookResult()
        ctx = self._ctx
        if ctx is None:
            return result
        frame = pd.DataFrame(self._rows)
        table.write_table(ctx.out_dir / table.GPU_TABLE, table.GPU_SCHEMA, self._rows)
        result.environment = {
            "interval_s": self.interval_s,
            "readings": len(frame),
            "devices": [{"index": i, "name": name} for i, _, name in self._devices],
        }
        throttle = throttling(frame)
        if throttle:
            result.environment["throttle"] = throttle
        for gpu, shares in throttle.items():
            for kind in THROTTLE_KINDS:
                share = shares[f"{kind}_share"]
                if share > 0:
                    label = kind.replace("_", " ")
                    result.notes.append(f"GPU {gpu}: {label} throttling in {share:.0%} of readings")
        if self._failures:
            result.notes.append(f"nvml sampling stopped early: {self._failures[0]}")
        key = "gpu_density" if self.primary else "gpu_density_nvml"
        start_epoch_ns = self._anchor_ns + ctx.start_monotonic_ns
        add_gpu_density(result, key, frame, ctx.out_dir, start_epoch_ns)
        return result


def throttling(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per GPU, the share of readings with each kind of slowdown (`<kind>_share`); {}
    without throttle reasons."""
    if frame.empty or frame["throttle_reasons"].isna().all():
        return {}
    out = {}
    for gpu, rows in frame.groupby("gpu"):
        reasons = rows["throttle_reasons"].dropna().astype("int64")
        out[str(gpu)] = {
            f"{kind}_share": float((reasons & bits).astype(bool).mean())
            for kind, bits in THROTTLE_KINDS.items()
        }
    return out
