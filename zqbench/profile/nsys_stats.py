"""`nsys stats` CSV files -> ProfileOp rows: the top kernels and the NVTX range summary.

nsys writes one CSV per report, named `<base>_<report>.csv`; the columns used are those
of `cuda_gpu_kern_sum` and `nvtx_sum`: "Total Time (ns)", "Instances" (or "Count"), and
"Name" (or "Range").
"""

from __future__ import annotations

import csv
from pathlib import Path

from zqbench.summary import ProfileOp


def read_summary(path: Path, limit: int = 15) -> list[ProfileOp]:
    """The rows of one summary CSV, by total time; [] when the file is absent or empty."""
    if not path.is_file():
        return []
    rows: list[ProfileOp] = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            name = row.get("Name") or row.get("Range") or ""
            try:
                total_ns = float(row.get("Total Time (ns)") or 0)
                calls = int(float(row.get("Instances") or row.get("Count") or 0))
            except ValueError:
                continue  # a note line nsys put among the rows
            rows.append(ProfileOp(name=name, calls=calls, total_ms=round(total_ns / 1e6, 3)))
    rows.sort(key=lambda r: -r.total_ms)
    return rows[:limit]


def report_csv(base: Path, report: str) -> Path:
    """The CSV `nsys stats --output=<base>` writes for `report` (cuda_gpu_kern_sum, nvtx_sum)."""
    return base.with_name(f"{base.name}_{report}.csv")
