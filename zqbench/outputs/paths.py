"""Where a run's outputs go: `reports/<UTC time>-<scenario>/` unless `--out` names a folder,
and the names of the files zqbench.outputs writes there.

default_out_dir("burst", now=...)  -> reports/20261129T104501Z-burst
make_out_dir(out=None, scenario="burst")  creates it (adding -2, -3 ... on a clash)

Every file zqbench.outputs writes is named here, and zqbench.outputs.registry says which
document each is rendered from. The files written below this layer are named by their
writers: samples.parquet by zqbench.recorder, the telemetry tables by zqbench.telemetry.table.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

REPORTS_ROOT = Path("reports")
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"  # <figure>.png, one per figure of the report (or the comparison)
SWEEP_JSON = "sweep.json"
SWEEP_MD = "sweep.md"
CONFORM_JSON = "conform.json"
COMPARE_JSON = "compare.json"
COMPARE_MD = "compare.md"
COMPARE_HTML = "compare.html"


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
    """Create and return the output folder.

    `out` (from --out) is used as given and may already exist. The default folder is
    never reused: a second run in the same second gets a -2, -3 ... suffix."""
    if out is not None:
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = default_out_dir(scenario, now=now, root=root)
    base.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        path = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free output folder next to {base}")
