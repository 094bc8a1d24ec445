"""GPU utilization density: the mean GPU busy fraction while at least one request holds a
slot, from NVML (the seed's formula; zqbench's `gpu_density` is the same, seen from outside).

A thread reads NVML's utilization every 0.1 s while a slot is in use and keeps the last 100
such readings (10 s of busy time); the idle gaps between requests never count. Where NVML
does not start (no NVIDIA driver, no GPU, the sim or CPU engine) there is no sampler and the
metric is absent, with the reason, never 0.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

INTERVAL_S = 0.1
WINDOW = 100


def _nvml_index(device: str) -> int:
    """NVML numbers every GPU of the machine; CUDA only the visible ones, in their order."""
    cuda_index = int(device.split(":", 1)[1]) if ":" in device else 0
    visible = [
        v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()
    ]
    if visible and cuda_index < len(visible) and visible[cuda_index].isdigit():
        return int(visible[cuda_index])
    return cuda_index


class DensitySampler:
    def __init__(self, nvml: Any, handle: Any, busy: Callable[[], bool]) -> None:
        self._nvml, self._handle, self._busy = nvml, handle, busy
        self._readings: deque[float] = deque(maxlen=WINDOW)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpu-density", daemon=True)

    @classmethod
    def start(cls, device: str, busy: Callable[[], bool]) -> DensitySampler | str:
        """A running sampler for `device` ("cuda:0"), or why there is none."""
        if not device.startswith("cuda"):
            return f"no GPU: the engine runs on {device}"
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(_nvml_index(device))
        except Exception as exc:  # no module, no driver, no such device: all mean absent
            return f"NVML did not start: {type(exc).__name__}"
        sampler = cls(pynvml, handle, busy)
        sampler._thread.start()
        return sampler

    def density(self) -> float | None:
        readings = list(self._readings)
        return sum(readings) / len(readings) if readings else None

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            if not self._busy():
                continue
            try:
                util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
            except Exception:  # a transient NVML error loses one reading, not the sampler
                continue
            self._readings.append(util / 100.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
