"""`zqbench run` and its run folder: never merged into, never left half-written or empty,
and a disk that refuses the outputs is the user's error (exit 2), not zqbench's."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.core.conftest import MODEL, REPO, write_scenario, zqbench, zqbench_here
from tests.core.test_run_cli import closed_port, one_error_line
from tests.polling import wait_for
from zqbench.samples import writer as recorder
from zqbench.target.embedded import EmbeddedServer

SHORT = """
name = "short"
description = "short"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = {rate}
duration = "{duration}"
graceful_stop = "5s"
[request]
max_tokens = 4
stream = true
timeout = "20s"
prompt_tokens = 16
"""


@pytest.mark.slow
def test_reused_out_with_an_earlier_runs_samples_is_refused(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    """A killed run left its stream behind: a new run there must not merge it (exit 2)."""
    out = tmp_path / "run"
    out.mkdir()
    planted = out / "samples.w1.arrows"
    planted.write_bytes(b"an earlier run's samples")
    res = zqbench(
        "run", "smoke", "--target", ref_server.base_url, "--model", MODEL,
        "--out", str(out), "--quiet",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert one_error_line(res.stderr) == (
        f"zqbench: error: --out {out}: already holds a run's files (samples.w1.arrows); "
        "choose another --out or remove that folder"
    )
    assert sorted(p.name for p in out.iterdir()) == ["samples.w1.arrows"]


@pytest.mark.parametrize("given_out", [True, False], ids=["--out", "default-folder"])
def test_a_failed_start_leaves_no_output_folder(
    tmp_path: Path, given_out: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    args = ["--out", str(out)] if given_out else []
    port = closed_port()
    monkeypatch.chdir(tmp_path)  # where the default folder would go
    res = zqbench_here(
        "run", "smoke", "--target", f"http://127.0.0.1:{port}", "--model", "m", *args
    )
    assert res.returncode == 3, res.stderr
    assert not out.exists()
    reports = tmp_path / "reports"  # the default folders' parent may stay: it is shared
    assert not reports.exists() or not any(reports.iterdir())


def test_an_out_below_a_file_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = zqbench_here(
        "run", "smoke", "--target", "http://127.0.0.1:9", "--out", str(blocker / "r")
    )
    assert res.returncode == 2, res.stderr
    assert one_error_line(res.stderr) == (
        f"zqbench: error: --out {blocker / 'r'}: cannot write there (Not a directory)"
    )


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_exit_2(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes any write past 64 KiB fail as a full disk would (EFBIG, not
    ENOSPC: the same OSError path). The samples fit; report.html's figures do not."""
    scenario = write_scenario(tmp_path, SHORT.format(rate=10, duration="1s"))
    out = tmp_path / "run"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    res = subprocess.run(
        [sys.executable, "-m", "zqbench", "run", str(scenario), "--target", ref_server.base_url,
         "--model", MODEL, "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, cwd=REPO, preexec_fn=small_files,
        check=False,
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    line = one_error_line(res.stderr)
    # safe_files names the file the disk refused (a figure of report.html) and the fix.
    assert line.startswith(f"zqbench: error: cannot write {out}/"), line
    assert line.endswith(": File too large; raise the file size limit (ulimit -f), or write to "
                         "another folder"), line  # fmt: skip
    assert "internal error" not in res.stderr


@pytest.mark.slow
def test_signals_while_the_outputs_are_written_do_not_cut_them(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    """SIGTERM stops the load; SIGTERMs that follow, every 20 ms until report.html (the last
    output) is in place, land while the outputs are written: those finish, exit 130."""
    scenario = write_scenario(tmp_path, SHORT.format(rate=20, duration="60s"))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zqbench", "run", str(scenario), "--target", ref_server.base_url,
         "--model", MODEL, "--out", str(out), "--quiet"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # A few samples to write, on disk (polled, however busy the machine is).
        wait_for(lambda: out.exists() and len(recorder.load_samples(out)) >= 5, "5 samples")
        deadline = time.monotonic() + 60
        while_writing = 0
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "report.html").exists():
                break
            writing = (out / "samples.parquet").exists()
            proc.send_signal(signal.SIGTERM)
            while_writing += writing
            time.sleep(0.02)
        stderr = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert while_writing > 0, "no signal landed while the outputs were written"
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    for name in ("summary.json", "summary.md", "junit.xml", "report.html", "samples.parquet"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["environment"]["interrupted"] is True
