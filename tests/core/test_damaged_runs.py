"""Damaged saved runs under gate, compare and report (#25 item 14): one line naming the file
and what is wrong, exit 2; never an internal error (exit 5)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.core.conftest import zqbench_here
from tests.reporting.synth import write_synthetic_run
from zqbench.errors import EXIT_USAGE


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("damaged") / "base"
    write_synthetic_run(folder, n=200, duration_s=4.0)
    return folder


def _truncate(run: Path) -> None:
    path = run / "samples.parquet"
    path.write_bytes(path.read_bytes()[:1000])


def _foreign(run: Path) -> None:
    pq.write_table(pa.table({"x": [1, 2, 3]}), run / "samples.parquet")


def _link(run: Path) -> None:
    (run / "samples.parquet").unlink()
    (run / "samples.parquet").symlink_to("/etc/passwd")


def _null_send(run: Path) -> None:
    t = pq.read_table(run / "samples.parquet")
    i = t.schema.get_field_index("t_send")
    field = t.schema.field(i).with_nullable(True)
    t = t.set_column(i, field, pa.nulls(t.num_rows, field.type))
    pq.write_table(t, run / "samples.parquet")


def _retyped(run: Path) -> None:
    t = pq.read_table(run / "samples.parquet")
    i = t.schema.get_field_index("status")
    column = pa.array(["x"] * t.num_rows)
    t = t.set_column(i, pa.field("status", pa.string()), column)
    pq.write_table(t, run / "samples.parquet")


def _nested(run: Path) -> None:
    (run / "summary.json").write_text("[" * 100_000)


def _a_list(run: Path) -> None:
    (run / "summary.json").write_text("[1, 2]")


SAMPLES = "samples.parquet"
CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (
        _truncate,
        f"{SAMPLES}: not a readable Parquet file (Parquet magic bytes not found in footer."
        " Either the file is corrupted or this is not a parquet file.)",
    ),
    "foreign": (_foreign, f"{SAMPLES}: not a run's samples (no column request_id and 10 more)"),
    "symlink": (_link, f"{SAMPLES}: a symbolic link; a run's samples are a plain file"),
    "null t_send": (
        _null_send,
        f"{SAMPLES}: column t_send has 200 empty (null) values; a run records one for every"
        " request",
    ),
    "retyped": (_retyped, f"{SAMPLES}: column status is string, a run's samples have int32"),
    "nested summary": (_nested, "summary.json: not a summary (JSON nested too deeply to read)"),
    "summary list": (_a_list, "summary.json: not a summary (a JSON list, not an object)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_run_is_one_line_and_exit_2(base: Path, tmp_path: Path, case: str) -> None:
    damage, message = CASES[case]
    run = tmp_path / "run"
    shutil.copytree(base, run)
    damage(run)
    for args in (
        ("gate", str(run)),
        ("report", str(run)),
        ("compare", str(base), str(run), "--out", str(tmp_path / "cmp")),
    ):
        result = zqbench_here(*args)
        assert result.returncode == EXIT_USAGE, (args, result.stderr)
        assert result.stderr.strip() == f"zqbench: error: {run}/{message}", args


def test_a_run_killed_before_its_first_batch_is_recovered(base: Path, tmp_path: Path) -> None:
    """No summary, an empty worker stream and a run-start.json of the wrong shape: `report`
    recovers an empty, invalid run instead of failing on its status plot."""
    run = tmp_path / "run"
    shutil.copytree(base, run)
    for name in ("summary.json", "samples.parquet"):
        (run / name).unlink()
    (run / "run-start.json").write_text('{"a": 1}')
    (run / "samples.w0.arrows").touch()
    result = zqbench_here("report", str(run))
    assert result.returncode == 0, result.stderr
    assert (run / "report.html").is_file() and (run / "summary.json").is_file()
    assert not (run / "plots" / "status_mix.png").exists()
