"""NvmlSampler on a fake NVML layer: 10 Hz readings, the GPU table, throttling, gpu_density."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.polling import wait_for
from tests.telemetry.conftest import run_with
from tests.telemetry.fake_nvml import FakeNvml
from zqbench.hooks.contract import HookContext
from zqbench.outputs.render import load_gpu
from zqbench.target.embedded import EmbeddedServer
from zqbench.telemetry import table
from zqbench.telemetry.nvml import NvmlSampler


def _ctx(tmp_path: Path) -> HookContext:
    return HookContext(
        run_name="t",
        out_dir=tmp_path,
        base_url="http://127.0.0.1:1",
        host="127.0.0.1",
        port=1,
        start_monotonic_ns=time.perf_counter_ns(),
        stages=[],
    )


def test_samples_every_100_ms_and_writes_the_gpu_table(tmp_path: Path) -> None:
    """About 10 readings a second, on an absolute schedule, in the plot's table format."""
    fake = FakeNvml(devices=2, util=lambda t: 75, power_supported=False)
    sampler = NvmlSampler(fake)
    t0 = time.monotonic()
    sampler.start(_ctx(tmp_path))
    wait_for(lambda: len(fake.queries) >= 2 * 11, "11 readings of each GPU")
    result = sampler.stop()
    elapsed = time.monotonic() - t0
    per_gpu = len(fake.queries) // 2
    # Never more often than every 100 ms: a late reading skips the slots it missed.
    assert 11 <= per_gpu <= elapsed / 0.1 + 1, f"{per_gpu} readings in {elapsed:.3f} s"
    gaps = np.diff(fake.queries[::2])
    assert np.median(gaps) == pytest.approx(0.1, abs=0.01), f"gaps {np.round(gaps, 4)}"
    assert fake.shutdowns == 1

    frame = pd.read_parquet(tmp_path / table.GPU_TABLE)
    assert frame["t_epoch_ns"].dtype == np.int64
    assert sorted(frame["gpu"].unique()) == [0, 1]
    assert frame["util"].eq(0.75).all()
    assert frame["mem_total_bytes"].eq(80 << 30).all()
    assert frame["sm_clock_mhz"].eq(1980).all()
    assert frame["temp_c"].eq(61).all()
    assert frame["power_w"].isna().all()  # unsupported: null, not 0
    assert abs(frame["t_epoch_ns"].iloc[0] - time.time_ns()) < 5 * 10**9
    # The report reads what the sampler writes (one GPU_TABLE name, in telemetry.table).
    assert len(load_gpu(tmp_path, int(frame["t_epoch_ns"].iloc[0]))["t_s"]) == len(frame)
    assert result.environment["devices"] == [
        {"index": 0, "name": "Fake GPU"},
        {"index": 1, "name": "Fake GPU"},
    ]
    assert result.notes[0].startswith("gpu_density unavailable")  # no samples in the folder
    assert "gpu_density" not in result.telemetry


def test_thermal_and_power_throttling_are_flagged(tmp_path: Path) -> None:
    fake = FakeNvml(reasons=0x40 | 0x04)  # HwThermalSlowdown | SwPowerCap
    sampler = NvmlSampler(fake)
    sampler.start(_ctx(tmp_path))
    wait_for(lambda: len(fake.queries) >= 3, "3 readings")
    result = sampler.stop()
    shares = result.environment["throttle"]["0"]
    assert shares == {"thermal_share": 1.0, "power_share": 1.0, "hw_slowdown_share": 0.0}
    assert "GPU 0: thermal throttling in 100% of readings" in result.notes
    assert "GPU 0: power throttling in 100% of readings" in result.notes


def test_no_throttling_no_flag(tmp_path: Path) -> None:
    fake = FakeNvml(reasons=0x01)  # GpuIdle only: clocks low because nothing runs
    sampler = NvmlSampler(fake)
    sampler.start(_ctx(tmp_path))
    wait_for(lambda: len(fake.queries) >= 3, "3 readings")
    result = sampler.stop()
    assert result.environment["throttle"]["0"]["thermal_share"] == 0.0
    assert not [n for n in result.notes if "throttling" in n]


def test_stop_without_start_is_safe() -> None:
    fake = FakeNvml()
    result = NvmlSampler(fake).stop()
    assert result.telemetry == {} and fake.shutdowns == 1


@pytest.mark.slow
def test_a_run_reports_gpu_density_from_nvml(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    """Through run_scenario: the hook's gpu_density reaches summary.json and the GPU plot."""
    fake = FakeNvml(util=lambda t: 80)
    result = run_with([NvmlSampler(fake)], ref_server, tmp_path)
    assert result.summary.telemetry["gpu_density"] == pytest.approx(0.8)
    assert result.summary.environment["nvml"]["readings"] >= 15
    assert (result.out_dir / table.GPU_TABLE).is_file()
    assert (result.out_dir / "plots" / "gpu.png").is_file()
