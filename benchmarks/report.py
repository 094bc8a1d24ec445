"""Render every output of a synthetic 1,000,000-sample run; report wall time and peak memory.

    .venv/bin/python benchmarks/report.py [--n 1000000] [--keep DIR]

Budget (issue 5): under 15 s and under 2 GB peak RSS for 1,000,000 samples. Writing the
synthetic run (summarize included) is timed separately: it is the run's cost, not the
report's. Peak memory is the process's max RSS (ru_maxrss) after rendering.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reporting.synth

from tests.reporting.synth import write_synthetic_run
from zqbench.saved.report import rerender_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of run time")
    parser.add_argument("--keep", type=Path, help="write the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "run"
        t0 = time.perf_counter()
        write_synthetic_run(out, n=args.n, duration_s=args.duration, refused=0.02, gpu=True)
        t1 = time.perf_counter()
        paths = rerender_run(out)
        t2 = time.perf_counter()
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
        size_kb = (out / "report.html").stat().st_size / 1024
    print(f"samples            {args.n:,}")
    print(f"write run + summary {t1 - t0:6.2f} s")
    print(
        f"render all outputs  {t2 - t1:6.2f} s  ({len(paths)} files, report.html {size_kb:.0f} KiB)"
    )
    print(f"peak RSS            {peak_gb:6.2f} GiB")
    ok = (t2 - t1) < 15.0 and peak_gb < 2.0
    print("within budget (15 s, 2 GB):", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
