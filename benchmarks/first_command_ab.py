"""The README's first command, two commits side by side, A B A B: how often it passes.

    .venv/bin/python benchmarks/first_command_ab.py --a HEAD~1 --b HEAD --pairs 4
    .venv/bin/python benchmarks/first_command_ab.py --a HEAD --b HEAD --pairs 4 --fifo

Each commit is checked out into a temporary git worktree and run with this venv: `zqbench
run burst` with no target, so each run starts its own embedded reference server (the engine
`auto` picks: sim where no GPU is usable), pinned to the last CPU and zqbench to the others,
as a newcomer's first run is. `--fifo` runs the queueing twin (`--server-scheduler fifo`)
instead, which should FAIL every time. Prints each run's verdict, whether it was valid, and
the burst's SLO values from its summary.json, then the PASS count per commit. The runs
alternate because this machine's noise changes from minute to minute; run nothing else
meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.lag_ab import checkout  # noqa: E402


def one_run(tree: Path, out: Path, fifo: bool) -> dict:
    """One `zqbench run burst` from `tree`: verdict, validity and each SLO's value."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-m", "zqbench", "run", "burst", "--quiet", "--out", str(out)]
    if fifo:
        args += ["--server-scheduler", "fifo"]
    code = subprocess.run(args, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False).returncode  # fmt: skip
    path = out / "summary.json"
    if not path.exists():
        return {"exit": code, "verdict": "no summary"}
    summary = json.loads(path.read_text())
    row = {"exit": code, "verdict": summary["verdict"], "valid": summary["validity"]["ok"]}
    for slo in summary["slos"]:
        row[slo["expr"]] = slo["value"]
    row["schedule_lag p99 ms"] = (summary["metrics"]["schedule_lag"].get("p99") or 0) * 1e3
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="the commit before (a git revision)")
    parser.add_argument("--b", default="HEAD", help="the commit after")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--fifo", action="store_true", help="the FIFO twin instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="zq-first-") as tmp:
        where = Path(tmp)
        trees = {"A": checkout(args.a, where / "a"), "B": checkout(args.b, where / "b")}
        passed = {"A": 0, "B": 0}
        try:
            for pair in range(args.pairs):
                for side, tree in trees.items():
                    row = one_run(tree, where / f"out-{side}-{pair}", args.fifo)
                    passed[side] += row["verdict"] == "pass"
                    print(f"pair {pair + 1} {side}: {json.dumps(row)}", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)],
                               cwd=REPO, check=False)  # fmt: skip
        print(f"PASS: A ({args.a}) {passed['A']} of {args.pairs}, "
              f"B ({args.b}) {passed['B']} of {args.pairs}")  # fmt: skip


if __name__ == "__main__":
    main()
