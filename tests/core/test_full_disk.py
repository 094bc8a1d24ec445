"""`zqbench report` on a disk that will not take its files (#25 item 14): one line naming the
file and the fix, exit 2, no temporary file left, the saved summary.json untouched.

Two ways the disk says no: a real full filesystem (a small tmpfs, which needs root: it runs
under CI=true) and the file size limit (RLIMIT_FSIZE, as any user), which the same write
path reports with its own fix.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reporting.synth import write_synthetic_run
from zqbench.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a fresh interpreter renders a report


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("disk") / "base"
    write_synthetic_run(folder, n=200, duration_s=4.0)
    for rendered in ("report.html", "summary.md", "junit.xml", "plots"):
        path = folder / rendered
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    return folder


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _report(run: Path, limit_bytes: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "zqbench", "report", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        preexec_fn=limit,
    )


def _assert_one_line(result: subprocess.CompletedProcess[str], run: Path, tail: str) -> None:
    assert result.returncode == EXIT_USAGE, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"zqbench: error: cannot write {run}/"), lines[0]
    assert lines[0].endswith(tail), lines[0]
    assert not [p for p in run.rglob("*.tmp")], "a temporary file was left behind"


@pytest.fixture
def small_disk(tmp_path: Path, base: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        reason = "needs root to mount a small tmpfs"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI=true runs as root)")
        pytest.skip(reason)
    mount = tmp_path / "disk"
    mount.mkdir()
    # The saved run fits with a few pages to spare; its report (about 1 MB of PNG) does not.
    size_kib = _size(base) // 1024 + 64
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(mount)],
        check=True,
        timeout=10,
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True, timeout=10)


@pytest.mark.root
def test_report_on_a_full_disk_is_one_line_and_exit_2(base: Path, small_disk: Path) -> None:
    run = small_disk / "run"
    shutil.copytree(base, run)
    summary = (run / "summary.json").read_bytes()
    result = _report(run)
    _assert_one_line(
        result, run, ": No space left on device; free some space on that disk, or write to "
        "another folder",
    )  # fmt: skip
    assert (run / "summary.json").read_bytes() == summary


def test_report_past_the_file_size_limit_is_one_line_and_exit_2(base: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    summary = (run / "summary.json").read_bytes()
    result = _report(run, limit_bytes=16 * 1024)  # a plot is larger; summary.md is not
    _assert_one_line(
        result, run, ": File too large; raise the file size limit (ulimit -f), or write to "
        "another folder",
    )  # fmt: skip
    assert (run / "summary.json").read_bytes() == summary
