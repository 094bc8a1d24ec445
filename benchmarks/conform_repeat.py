"""`zqbench conform` N times against one target: how often each check gives each status.

A conformance verdict is a measurement on a shared machine; one run proves little about the
next. This runs conform `--runs` times, one after another, against a target that is already
up, each run pinned to the last CPU (the server under test should have the others), and
writes a JSON record and a Markdown table: per check, its statuses over the runs, and the
capacity each zero-queue check judged by.

Reproduce the llama.cpp figure in docs/targets.md (needs tests/llamacpp/setup.sh first):

    bash tests/llamacpp/serve.sh 8080 &      # llama-server, 4 slots, pinned to core 0
    .venv/bin/python benchmarks/conform_repeat.py --target http://127.0.0.1:8080 \\
        --runs 5 --out docs/benchmarks/conform-llamacpp-DATE
    kill %1

All traffic goes to the target named; nothing is started or stopped here but zqbench.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any


def one_run(target: str, out: Path, extra: list[str]) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cpus[-1])] if len(cpus) > 1 else []
    t0 = time.monotonic()
    done = subprocess.run(
        [*pin, sys.executable, "-m", "zqbench", "conform", "--target", target,
         "--out", str(out), *extra],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    if not (out / "conform.json").is_file():  # the target is down, or conform refused
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:]
        raise SystemExit(f"conform_repeat: conform exited {done.returncode}: {' '.join(tail)}")
    report = json.loads((out / "conform.json").read_text())
    checks = {
        c["id"]: {
            "status": c["status"],
            "reason": c["reason"],
            "capacity": (c.get("evidence") or {}).get("capacity"),
        }
        for c in report["checks"]
    }
    return {"exit": done.returncode, "seconds": round(elapsed, 1), "checks": checks}


def table(runs: list[dict[str, Any]]) -> str:
    ids = list(runs[0]["checks"])
    lines = ["| check | statuses over the runs | capacity judged by |", "|---|---|---|"]
    for cid in ids:
        statuses = Counter(r["checks"][cid]["status"] for r in runs if cid in r["checks"])
        caps = {
            json.dumps(cap, sort_keys=True)
            for r in runs
            if (cap := r["checks"].get(cid, {}).get("capacity")) is not None
        }
        shown = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
        lines.append(f"| {cid} | {shown} | {'; '.join(sorted(caps))} |")
    exits = Counter(r["exit"] for r in runs)
    lines.append("")
    lines.append(
        f"{len(runs)} runs, exit codes {dict(sorted(exits.items()))}, "
        f"{sum(r['seconds'] for r in runs):.0f} s in all."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--target", required=True, help="base URL of a running endpoint")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    p.add_argument("conform_args", nargs="*", help="more `zqbench conform` options, after --")
    args = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="conform-repeat-") as tmp:
        for i in range(args.runs):
            run = one_run(args.target, Path(tmp) / str(i), args.conform_args)
            print(f"run {i + 1}/{args.runs}: exit {run['exit']} in {run['seconds']} s", flush=True)
            runs.append(run)
    record = {"target": args.target, "date": time.strftime("%Y-%m-%d"), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(
        f"# conform x{args.runs} against {args.target} ({record['date']})\n\n" + table(runs)
    )
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
