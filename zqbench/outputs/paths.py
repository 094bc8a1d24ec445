"""Where a run's outputs go: `reports/<UTC time>-<scenario>/` unless `--out` names a folder,
and the names of the files zqbench.outputs writes there.

default_out_dir("burst", now=...)  -> reports/20261129T104501Z-burst
make_out_dir(out=None, scenario="burst")  creates it (adding -2, -3 ... on a clash)

A folder that already holds a run's files (`RUN_FILES`) is never written into: its samples
would be merged into the new run's. A folder that cannot be created or written is the
user's to fix (UsageError, exit 2), not a crash.

Every file zqbench.outputs writes is named here, and zqbench.outputs.registry says which
document each is rendered from. The files written below this layer are named by their
writers: samples.parquet by zqbench.samples.writer, the telemetry tables by zqbench.telemetry.table.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

from zqbench.errors import UsageError

REPORTS_ROOT = Path("reports")
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"  # <figure>.png, one per figure of the report (or the comparison)
SWEEP_JSON = "sweep.json"
SWEEP_MD = "sweep.md"
ADVICE_JSON = "advice.json"  # zqbench sweep --server-cmd (and advice.md, plots/advice.png)
ADVICE_MD = "advice.md"
CONFORM_JSON = "conform.json"
COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"
COMPARE_HTML = "compare.html"
RUN_START_JSON = "run-start.json"  # what a run knows at t = 0; removed once summary.json is
# What marks a folder as holding a run: the workers' sample streams (samples.w<N>.arrows,
# named by zqbench.samples.writer), their client-lag histograms (zqbench.engines.loop_lag),
# the merged samples, the summary. A new run there would merge an earlier run's.
RUN_FILES = ("samples*.arrows", "client_lag.w*.json", "samples.parquet", SUMMARY_JSON)


def scenario_slug(scenario: str) -> str:
    """A folder-safe scenario name: a path's stem, unsafe characters replaced by '-'."""
    stem = Path(scenario).stem if scenario.endswith(".toml") else Path(scenario).name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.")
    return slug or "run"


def default_out_dir(
    scenario: str, *, now: datetime | None = None, root: Path = REPORTS_ROOT
) -> Path:
    """reports/<YYYYmmddTHHMMSSZ>-<scenario> for the UTC time `now` (default: now)."""
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return root / f"{moment:%Y%m%dT%H%M%SZ}-{scenario_slug(scenario)}"


def make_out_dir(
    out: str | Path | None,
    scenario: str,
    *,
    now: datetime | None = None,
    root: Path = REPORTS_ROOT,
) -> Path:
    """Create and return the output folder, checked writable.

    `out` (from --out) is used as given and may already exist, unless it holds a run's
    files. The default folder is never reused: a second run in the same second gets a
    -2, -3 ... suffix. UsageError when the folder cannot be created or written."""
    if out is not None:
        path = Path(out)
        _refuse_a_run(path)
        _writable(path, f"--out {path}", lambda: path.mkdir(parents=True, exist_ok=True))
        return path
    base = default_out_dir(scenario, now=now, root=root)
    parent = base.parent
    _writable(parent, str(parent), lambda: parent.mkdir(parents=True, exist_ok=True))
    for attempt in range(1, 1000):
        path = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise UsageError(f"no free output folder next to {base}; choose one with --out")


def run_files(folder: Path) -> list[str]:
    """The names of the run files (`RUN_FILES`) in `folder`, sorted; [] when none or no folder."""
    if not folder.is_dir():
        return []
    return sorted({p.name for pattern in RUN_FILES for p in folder.glob(pattern)})


def _refuse_a_run(path: Path) -> None:
    found = run_files(path)
    if found:
        raise UsageError(
            f"--out {path}: already holds a run's files ({', '.join(found)}); "
            "choose another --out or remove that folder"
        )


def _writable(path: Path, label: str, create: Callable[[], None]) -> None:
    """Create the folder, then prove a file can be made in it (a read-only mount, a folder
    of another user): a run must not find out after its load that it cannot save it."""
    try:
        create()
        probe = path / f".zqbench-write-check-{uuid.uuid4().hex}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise UsageError(f"{label}: cannot write there ({reason})") from None


def existing_ancestor(path: Path) -> Path:
    """`path` if it exists, else its nearest existing parent: what a failed run must keep."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextlib.contextmanager
def removed_if_empty_on_error(out_dir: Path, kept: Path) -> Iterator[None]:
    """A run that fails to start (bad target, bad hook) leaves no empty folder behind: on
    any exception, `out_dir` and the parents created for it (below `kept`, the folder that
    existed before) are removed while empty. One that wrote something keeps its folder (a
    server log, samples to recover)."""
    try:
        yield
    except BaseException:
        folder = Path(os.path.abspath(out_dir))
        while folder != kept and kept in folder.parents:
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
            folder = folder.parent
        raise
