"""#25 item 1: no output is written through a symbolic link. A link planted in a run folder
is replaced, never followed; a folder that is a link is refused with one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from zqbench.errors import UsageError
from zqbench.safe_files import open_new, write_bytes, write_via
from zqbench.samples.writer import SampleRecorder
from zqbench.saved.report import report_run

EXAMPLE = Path(__file__).resolve().parents[2] / "reports" / "examples" / "smoke-zero-queue"
VICTIM_TEXT = "a file the link points to; zqbench must leave it alone\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    return victim


@pytest.mark.slow  # renders a whole report
def test_report_replaces_a_link_planted_at_a_plot_and_leaves_its_target(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(EXAMPLE, run)
    victim = _victim(tmp_path)
    (run / "plots").mkdir()
    (run / "plots" / "histograms.png").symlink_to(victim)
    (run / "summary.md").unlink()
    (run / "summary.md").symlink_to(victim)
    written = report_run(run)
    assert victim.read_text() == VICTIM_TEXT
    for name in ("plots/histograms.png", "summary.md"):
        path = run / name
        assert path in written and not path.is_symlink() and path.is_file()
    assert (run / "plots" / "histograms.png").read_bytes().startswith(b"\x89PNG")


def test_a_plots_folder_that_is_a_link_is_refused_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(EXAMPLE, run)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "plots").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UsageError) as err:
        report_run(run)
    assert err.value.message == (
        f"{run / 'plots'} is a symbolic link; zqbench writes no output through a link: "
        "remove it, or choose another --out"
    )
    assert list(elsewhere.iterdir()) == []


def test_every_writer_replaces_a_link_instead_of_following_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    for i, write in enumerate(
        (
            lambda p: write_bytes(p, b"new"),
            lambda p: write_via(p, lambda tmp: tmp.write_bytes(b"new")),
        )
    ):
        path = tmp_path / f"out{i}"
        path.symlink_to(victim)
        write(path)
        assert not path.is_symlink() and path.read_bytes() == b"new"
    stream = tmp_path / "stream"
    stream.symlink_to(victim)
    with open_new(stream) as f:
        f.write(b"new")
    assert not stream.is_symlink() and stream.read_bytes() == b"new"
    assert victim.read_text() == VICTIM_TEXT
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_the_samples_stream_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "samples.w0.arrows"
    path.symlink_to(victim)
    recorder = SampleRecorder(path)
    recorder.close()
    assert victim.read_text() == VICTIM_TEXT
    assert not path.is_symlink() and path.stat().st_size > 0
