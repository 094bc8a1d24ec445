"""Fixed-shape decode steps against dynamic ones: TPOT and latency spread on the torch engine.

    .venv/bin/python benchmarks/step_shape.py [--pairs 2] [--steady-seconds 30]
        [--json docs/benchmarks/step-shape.json]

Each run is `zqbench run` as a user types it, against the embedded reference server
(torch engine, CPU, zero-queue, 8 slots, pinned to its own core by zqbench), with
`--server-arg=--step-shape=fixed` or `=dynamic`, in alternating order (fixed, dynamic,
fixed, ...), so both see the same machine:

1. **steady**: the burst's requests (32 prompt tokens, 256 output tokens, streamed) at
   4 req/s, Poisson, for `--steady-seconds`: one to three sequences running at a time.
2. **burst**: the bundled `burst` scenario, whole (a 100 req/s baseline, a 1000 req/s
   pulse): eight running, most arrivals refused.

From each run's summary.json: TPOT p50 and p99 (a request's mean time per output token
after the first), their ratio, latency p99/p50 of the admitted requests, and the verdict.
Then one more burst (fixed steps) whose requests are two classes alike but for the header
`X-Stream-Mode: low-latency` on one: TTFT p50/p99 per class, the header's effect under the
burst's load within one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEADY = """
name = "steady-4"
description = "The burst's requests at 4 req/s: one to three sequences running"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 4
duration = "{seconds}s"
arrivals = "poisson"
[request]
max_tokens = 256
stream = true
timeout = "60s"
prompt_tokens = 32
"""


def _two_class_burst() -> str:
    """The bundled burst with its requests split into two classes alike but for a header."""
    text = (REPO / "scenarios" / "burst.toml").read_text()
    text = text.replace('name = "burst"', 'name = "burst-low-latency"')
    text = text.replace("prompt_tokens = 32\n", "")
    return text + (
        '\n[[request.mix]]\nname = "low-latency"\nweight = 1\nprompt_tokens = 32\n'
        'headers = { "X-Stream-Mode" = "low-latency" }\n'
        '\n[[request.mix]]\nname = "plain"\nweight = 1\nprompt_tokens = 32\n'
    )


def run(scenario: str, shape: str, out: Path) -> dict[str, Any]:
    """One `zqbench run`; the figures of its summary.json."""
    cmd = [
        sys.executable, "-m", "zqbench", "run", scenario, "--server-engine", "torch",
        f"--server-arg=--step-shape={shape}", "--out", str(out), "-q",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    summary = json.loads((out / "summary.json").read_text())
    m = summary["metrics"]
    tpot, ttft = m["tpot"], m["ttft"]
    ratio = summary.get("ratios", {}).get("latency", {})
    return {
        "scenario": summary["scenario"]["name"],
        "shape": shape,
        "exit": done.returncode,
        "verdict": summary["verdict"],
        "ok": summary["requests"]["ok"],
        "tpot_p50_ms": tpot["p50"] * 1e3,
        "tpot_p99_ms": tpot["p99"] * 1e3,
        "tpot_ratio": tpot["p99"] / tpot["p50"],
        "latency_p99_p50": ratio.get("p99_p50"),
        "ttft_by_class": {
            k: {"p50_ms": v["p50"] * 1e3, "p99_ms": v["p99"] * 1e3, "n": v["n"]}
            for k, v in ttft.get("by_class", {}).items()
            if v.get("n")
        },
        "schedule_lag_p99_ms": m["schedule_lag"]["p99"] * 1e3,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--steady-seconds", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="zq-step-shape-") as tmp:
        folder = Path(tmp)
        steady = folder / "steady-4.toml"
        steady.write_text(STEADY.format(seconds=args.steady_seconds))
        n = 0
        for pair in range(args.pairs):
            for shape in ("fixed", "dynamic"):
                for scenario in (str(steady), "burst"):
                    n += 1
                    r = run(scenario, shape, folder / f"run{n}")
                    r["pair"] = pair
                    results.append(r)
                    print(
                        f"{r['scenario']:<10} {shape:<8} TPOT p50 {r['tpot_p50_ms']:.3f} ms "
                        f"p99 {r['tpot_p99_ms']:.3f} ms (x{r['tpot_ratio']:.3f}); latency "
                        f"p99/p50 {r['latency_p99_p50']}; {r['verdict']} (lag p99 "
                        f"{r['schedule_lag_p99_ms']:.1f} ms)",
                        flush=True,
                    )
        two = folder / "burst-low-latency.toml"
        two.write_text(_two_class_burst())
        r = run(str(two), "fixed", folder / "low-latency")
        results.append(r)
        for cls, t in r["ttft_by_class"].items():
            print(f"burst, fixed steps, class {cls:<11}: TTFT p50 {t['p50_ms']:.2f} ms, p99 "
                  f"{t['p99_ms']:.2f} ms (n {t['n']})")  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
