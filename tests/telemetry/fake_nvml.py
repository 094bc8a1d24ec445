"""A fake NVML module: the pynvml functions NvmlSampler calls, on CPU, with chosen values.

`util(t_s)` gives the GPU busy percent at t_s seconds after the fake was made, so a test
can script a utilization timeline. Power usage raises NVMLError, as on GPUs without a
power sensor, to show that an unsupported field becomes null rather than failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


class NVMLError(Exception):
    pass


@dataclass
class _Rates:
    gpu: int
    memory: int


@dataclass
class _Memory:
    used: int
    total: int


class FakeNvml:
    NVMLError = NVMLError

    def __init__(
        self,
        *,
        devices: int = 1,
        util: Callable[[float], int] = lambda t: 50,
        reasons: int = 0,
        power_supported: bool = True,
    ) -> None:
        self.devices = devices
        self.util = util
        self.reasons = reasons
        self.power_supported = power_supported
        self.t0 = time.monotonic()
        self.queries: list[float] = []  # monotonic time of each utilization query
        self.shutdowns = 0

    def nvmlDeviceGetCount(self) -> int:
        return self.devices

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"Fake GPU"

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Rates:
        now = time.monotonic()
        self.queries.append(now)
        return _Rates(gpu=self.util(now - self.t0), memory=20)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> _Memory:
        return _Memory(used=3 << 30, total=80 << 30)

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        return 1980

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if not self.power_supported:
            raise NVMLError("Not Supported")
        return 350_000  # mW

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self.reasons

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1
