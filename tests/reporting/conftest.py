"""Saved synthetic runs, written once per session (summarize() is the real one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.reporting.synth import write_synthetic_run

# Latencies 10.000 .. 29.995 ms in 5 µs steps (4000 values): every percentile is known.
UNIFORM_MS = 10.0 + np.arange(4000) * 0.005


@pytest.fixture(scope="session")
def rich_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2000 requests, two classes, 5% refused, timing headers and GPU telemetry."""
    path = tmp_path_factory.mktemp("runs") / "rich"
    write_synthetic_run(path, refused=0.05, gpu=True)
    return path


@pytest.fixture(scope="session")
def rendered_run(rich_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of rich_run after `zqbench report` (rendered once for all tests)."""
    from typer.testing import CliRunner

    from zqbench.cli import app

    run = Path(shutil.copytree(rich_run, tmp_path_factory.mktemp("rendered") / "run"))
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    return run


def uniform_run(path: Path, *, shift_ms: float = 0.0, seed: int = 0, **kw) -> Path:
    """4000 requests whose latencies are exactly UNIFORM_MS + shift_ms, in random order."""
    rng = np.random.default_rng(seed)
    write_synthetic_run(
        path, n=4000, seed=seed, latency_ms=rng.permutation(UNIFORM_MS), shift_ms=shift_ms, **kw
    )
    return path
