"""Bundled scenarios, scaled down, against the embedded reference server (sim engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zqbench.pipeline.run import RunOptions, RunResult, run_scenario


def run_bundled(
    scenario: str,
    out: Path,
    *,
    scheduler: str = "zero-queue",
    slots: int = 4,
    server_args: tuple[str, ...] = (),
    html: bool = False,
    **options: Any,
) -> RunResult:
    """One run of a bundled scenario on a fresh embedded sim server with `slots` slots.

    No report.html by default: its eight figures cost about 3 s of CPU a run, and these
    tests read summary.json, summary.md and the samples (tests/reporting renders pages)."""
    return run_scenario(
        RunOptions.of(
            scenario=scenario,
            server_engine="sim",
            server_scheduler=scheduler,
            server_args=("--max-batch-size", str(slots), *server_args),
            out=out,
            html=html,
            **options,
        )
    )


@pytest.fixture(autouse=True)
def calibration_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibration caches go to a temporary file, never to the user's ~/.cache."""
    monkeypatch.setenv("ZQBENCH_CALIBRATION", str(tmp_path / "calibration.json"))
