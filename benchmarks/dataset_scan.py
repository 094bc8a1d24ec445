"""The dataset source's index pass on a generated file: wall time, peak memory, row reads.

    .venv/bin/python benchmarks/dataset_scan.py [--mb 1024] [--format jsonl|sharegpt]

Writes a file of about `--mb` MiB (JSONL rows, or one ShareGPT JSON array) to a temporary
folder, then, in a fresh process, fits the dataset source to a scenario that sends it
(`zqbench.sources.fit_source`: hash, check, filter, order) and reads 10,000 rows as a
worker does. Peak memory is that process's max RSS (ru_maxrss), interpreter and imports
included. The file is never held in memory: the claim is that peak RSS stays far below
the file's size.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    "zero",
    "queue",
    "latency",
    "token",
    "prefill",
    "decode",
    "batch",
    "slot",
    "refuse",
    "admit",
    "tail",
    "burst",
]

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from zqbench.load import Slot
from zqbench.scenario import load_scenario
from zqbench.sources import fit_source
scenario = load_scenario(sys.argv[1])
t0 = time.perf_counter()
source = fit_source(scenario, 0, None)
t1 = time.perf_counter()
requests = source.open()
for i in range(10_000):
    requests.request(Slot(i, 0))
t2 = time.perf_counter()
print(json.dumps({
    "rows": len(source.rows),
    "fit_s": t1 - t0,
    "read_us": (t2 - t1) / 10_000 * 1e6,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def _row(rng: random.Random, fmt: str) -> str:
    prompt = " ".join(rng.choice(WORDS) for _ in range(max(3, int(rng.lognormvariate(4, 1)))))
    if fmt == "sharegpt":
        turns = [{"from": "human", "value": prompt}, {"from": "gpt", "value": prompt[:200]}]
        return json.dumps({"id": str(rng.random()), "conversations": turns})
    return json.dumps({"prompt": prompt, "output_tokens": rng.randint(1, 512)})


def write_file(path: Path, mb: int, fmt: str) -> int:
    rng = random.Random(0)
    target, written, rows = mb << 20, 0, 0
    with path.open("w") as f:
        f.write("[\n" if fmt == "sharegpt" else "")
        while written < target:
            line = _row(rng, fmt)
            sep = ",\n" if fmt == "sharegpt" and rows else ""
            f.write(sep + line + ("" if fmt == "sharegpt" else "\n"))
            written += len(line) + 2
            rows += 1
        f.write("\n]\n" if fmt == "sharegpt" else "")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--format", choices=("jsonl", "sharegpt"), default="jsonl")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / ("rows.json" if args.format == "sharegpt" else "rows.jsonl")
        t0 = time.perf_counter()
        rows = write_file(data, args.mb, args.format)
        written_s = time.perf_counter() - t0
        scenario = Path(tmp) / "s.toml"
        scenario.write_text(
            'name = "scan"\napi = "openai"\n[load]\nexecutor = "constant-arrival-rate"\n'
            f'rate = 1\nduration = "1s"\n[request]\ndataset = "{data.name}"\n'
        )
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(scenario)],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        child = json.loads(done.stdout)
        size_mb = data.stat().st_size / 2**20
    print(f"file               {size_mb:,.0f} MiB {args.format}, {rows:,} rows ({written_s:.0f} s)")
    print(f"index pass         {child['fit_s']:.1f} s ({size_mb / child['fit_s']:.0f} MiB/s)")
    print(f"row read           {child['read_us']:.1f} µs a request")
    print(f"peak RSS           {child['peak_mb']:.0f} MiB")
    print(f"kept rows          {child['rows']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
