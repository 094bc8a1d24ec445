"""benchmarks/gpu_check.py --dry-run: the GPU session's script, every phase on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.torch
def test_gpu_check_dry_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZQBENCH_CALIBRATION": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--dry-run", "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    doc = json.loads((tmp_path / "gpu_check.json").read_text())
    failed = {n: p.get("error") for n, p in doc["phases"].items() if p["status"] != "ok"}
    assert failed.pop("gpu tests") == "dry run: the GPU tests need CUDA"
    assert done.returncode == 0 and not failed, (failed, done.stdout[-2000:])
    schedulers = doc["phases"]["schedulers"]["result"]
    assert set(schedulers) == {"zero-queue", "fifo"}
    assert all(x["ttft_p99_ms"] is not None for x in schedulers.values())
    prof = doc["phases"]["profile"]["result"]
    assert prof["tool"] == "torch" and prof["request_ranges"] > 0
    md = (tmp_path / "gpu_check.md").read_text()
    assert "## schedulers: ok" in md and "## profile: ok" in md
