"""What malformed stream events cost the load loop: schedule lag with and without them.

    .venv/bin/python benchmarks/malformed_streams.py [--rate 30] [--seconds 10] [--rounds 2]
        [--json docs/benchmarks/malformed-streams.json]

`benchmarks/malformed_stream_server.py` (pinned to CPU 0) streams OpenAI chunks; zqbench
(pinned to CPU 1) runs a constant-arrival-rate scenario against it at `--rate` req/s. Per
mode (`clean`: every stream well-formed; `cut`: a fifth of them carry a JSON chunk cut
short; `nested`: a fifth carry a 600 KB event of nested objects), `--rounds` runs in turn:
each run's exit code, schedule lag (t_send - t_intended) p50/p99/max from its samples, and
its errors. A parser that holds the loop on an event shows as lag, and as an invalid run
(exit 4) once the lag p99 passes 10 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
MODES = {"clean": ("0", "cut"), "cut": ("5", "cut"), "nested": ("5", "nested")}
SCENARIO = """name = "malformed"
api = "openai"
[load]
executor = "constant-arrival-rate"
rate = {rate}
duration = "{seconds}s"
[request]
max_tokens = 8
prompt_tokens = 16
timeout = "10s"
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(mode: str, rate: float, seconds: float, folder: Path) -> dict[str, object]:
    every, kind = MODES[mode]
    port = _port()
    script = str(REPO / "benchmarks" / "malformed_stream_server.py")
    server = subprocess.Popen(
        ["taskset", "-c", "0", sys.executable, script, str(port), every, kind]
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        scenario = folder / f"{mode}.toml"
        scenario.write_text(SCENARIO.format(rate=rate, seconds=seconds))
        out = folder / f"run-{mode}-{time.monotonic_ns()}"
        done = subprocess.run(
            ["taskset", "-c", "1", sys.executable, "-m", "zqbench", "run", str(scenario),
             "--target", f"http://127.0.0.1:{port}", "--api", "openai", "--model", "m",
             "--calibration", "off", "-q", "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=seconds + 120,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=10)
    t = pq.read_table(out / "samples.parquet").to_pandas()
    lag_ms = (t["t_send"] - t["t_intended"]) / 1e6
    return {
        "mode": mode,
        "exit": done.returncode,
        "requests": len(t),
        "lag_p50_ms": round(float(lag_ms.quantile(0.5)), 3),
        "lag_p99_ms": round(float(lag_ms.quantile(0.99)), 3),
        "lag_max_ms": round(float(lag_ms.max()), 3),
        "errors": {str(k): int(v) for k, v in t["error"].value_counts().items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=30.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for mode in MODES:
                row = one(mode, args.rate, args.seconds, Path(tmp))
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.json:
        record = {"rate": args.rate, "seconds": args.seconds, "runs": rows}
        args.json.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
