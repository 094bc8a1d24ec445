"""Shared fixtures for the measuring core: a real reference server and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ProgrammedServer
from tests.servers.fixtures import programmed_server  # noqa: F401  (a fixture, used by name)
from zqbench.pipeline.run import RunOptions, RunResult, run_scenario
from zqbench.target.embedded import EmbeddedServer

REPO = Path(__file__).resolve().parents[2]
MODEL = "zq-reference"


@pytest.fixture(scope="session")
def ref_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The bundled reference server (sim engine, zero-queue, 16 slots) for the whole session."""
    log = tmp_path_factory.mktemp("refserver") / "server.log"
    with EmbeddedServer(
        engine="sim", scheduler="zero-queue", max_batch_size=16, log_path=log
    ) as server:
        yield server


def zqbench(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: Path | None = None
):
    """Run the CLI as a user would; returns the CompletedProcess (text)."""
    return subprocess.run(
        [sys.executable, "-m", "zqbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        env={**os.environ, **(env or {})},
        check=False,
    )


def zqbench_here(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (typer's runner), for errors raised before any run starts:
    the same exit code and lines, without the second or more a fresh interpreter takes to
    import zqbench on a busy machine."""
    from typer.testing import CliRunner

    from zqbench.cli import app

    result = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def write_scenario(folder: Path, body: str, name: str = "t") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(body)
    return path


@pytest.fixture(autouse=True)
def calibration_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prompt calibrations go to a temporary file, never to the user's ~/.cache."""
    monkeypatch.setenv("ZQBENCH_CALIBRATION", str(tmp_path / "calibration.json"))


def run_programmed(
    tmp_path: Path,
    scenario: str,
    program: str,
    *,
    html: bool = False,
    on_target: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[RunResult, dict]:
    """`scenario` (TOML text) run against a fresh programmed server whose every request
    follows `program` (an x-program header); the result and the server's ground truth.
    `options`: more RunOptions fields. report.html only with `html`: its figures cost about
    3 s of CPU a run, and most of these tests read the summary and the samples."""
    path = write_scenario(tmp_path, scenario)
    with ProgrammedServer() as server:
        result = run_scenario(
            RunOptions.of(
                scenario=str(path),
                target=server.url,
                model="m",
                headers=(program,),
                out=tmp_path / "run",
                calibration="off",
                html=html,
                **options,
            ),
            on_target=on_target,
        )
        truth = server.all_truth()
    return result, truth
