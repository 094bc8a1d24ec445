"""On a machine with an NVIDIA GPU: a real run against the torch engine on CUDA reports a
real gpu_density from NVML. Skipped where NVML does not start (no driver or GPU).

    .venv/bin/python -m pytest tests/telemetry/test_gpu_cuda.py -m gpu -s
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from zqbench.pipeline.hooks import telemetry_hooks
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer
from zqbench.telemetry.nvml import NvmlSampler
from zqbench.telemetry.table import GPU_TABLE

pytestmark = [pytest.mark.gpu, pytest.mark.torch, pytest.mark.slow]

BUSY = """
name = "gpu-density"
description = "8 s at 40 req/s, 128 output tokens: the GPU decodes most of the time"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 40
duration = "8s"
[request]
max_tokens = 128
prompt_tokens = 64
stream = true
"""


def test_torch_engine_on_cuda_reports_a_real_gpu_density(tmp_path: Path) -> None:
    probe = NvmlSampler.try_open()
    if probe is None:
        pytest.skip("NVML did not start: no NVIDIA driver or GPU here")
    probe.stop()  # only asked whether NVML starts; the run opens its own
    scenario_path = tmp_path / "busy.toml"
    scenario_path.write_text(BUSY)
    with EmbeddedServer(
        engine="torch",
        extra_args=("--device", "cuda"),
        log_path=tmp_path / "server.log",
    ) as server:
        assert str(server.health.get("device", "")).startswith("cuda"), server.health
        hooks = telemetry_hooks(["auto"], "127.0.0.1")
        assert [h.name for h in hooks] == ["nvml"]
        result = run_scenario(
            RunOptions.of(
                scenario=str(scenario_path),
                target=server.base_url,
                model=str(server.health.get("model")),
                out=tmp_path / "run",
                hooks=tuple(hooks),
            )
        )
    summary = result.summary
    density = summary.telemetry["gpu_density"]
    gpu = pd.read_parquet(result.out_dir / GPU_TABLE)
    print(
        f"gpu_density={density:.3f} readings={len(gpu)} "
        f"util_mean={gpu['util'].mean():.3f} sm_clock_max={gpu['sm_clock_mhz'].max()} "
        f"power_max_w={gpu['power_w'].max()} temp_max_c={gpu['temp_c'].max()} "
        f"notes={summary.environment.get('notes')}"
    )
    assert summary.requests.ok > 0
    assert 0.0 < density <= 1.0
    assert len(gpu) >= 60  # 10 Hz over >= 8 s, per GPU
    assert gpu["util"].max() > 0  # the torch engine really ran on this GPU
