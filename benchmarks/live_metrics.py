"""What `--metrics-port` costs the generator: 3000 req/s against a trivial server, with the
exposition scraped every second (as docs/dashboards/prometheus.yml does) against without, in
alternating runs (A B A B ...).

    .venv/bin/python benchmarks/live_metrics.py --rounds 6 --json live.json   # ~4 min

zqbench pinned to CPU 0, granian (benchmarks/trivial_server.py) to CPU 1, one worker; per run
the schedule lag p50/p99 (t_send - t_intended, from the samples), the achieved rate and
zqbench's CPU seconds (user + sys, start-up included: the same in both). Each round runs A
and B with the default spin (the lag a user gets), then with `--spin-us 0` (sleep only), whose
CPU is the work itself: the added CPU per request is B's minus A's over the requests sent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
from pathlib import Path

import httpx
import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loadgen import TrivialServer, free_port, pct, run_zqbench, scenario_file


class Scraper:
    def __init__(self, url: str, every_s: float) -> None:
        self.url, self.every_s, self.ok = url, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        with httpx.Client(timeout=2) as client:
            while not self._stop.wait(self.every_s):
                try:
                    client.get(self.url).raise_for_status()
                    self.ok += 1
                except httpx.HTTPError:
                    pass  # not up yet, or gone

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def one_run(
    target: str, tmp: Path, name: str, rate: float, seconds: float, live: bool, spin: bool
) -> dict:
    out = tmp / name
    args = [str(scenario_file(tmp, rate, seconds)), "--target", target, "--model", "bench",
            "--slo", "errors:rate<1", "--no-server-metrics",
            "--max-schedule-lag", "1s"]  # fmt: skip
    if not spin:
        args += ["--spin-us", "0"]  # sleep only: the CPU is the work, not the wait
    scrapes = 0
    if live:
        port = free_port()
        args += ["--metrics-port", str(port)]
        with Scraper(f"http://127.0.0.1:{port}/metrics", 1.0) as scraper:
            cpu, code = run_zqbench(args, out)
        scrapes = scraper.ok
    else:
        cpu, code = run_zqbench(args, out)
    table = pq.read_table(out / "samples.parquet").to_pandas()
    lag = (table["t_send"] - table["t_intended"]).to_numpy() / 1e6
    span = (table["t_send"].max() - table["t_send"].min()) / 1e9
    return {
        "live": live,
        "spin": spin,
        "exit": code,
        "sent": len(table),
        "achieved": (len(table) - 1) / span if span > 0 else 0.0,
        "lag_p50_ms": pct(lag, 0.5),
        "lag_p99_ms": pct(lag, 0.99),
        "cpu_s": cpu,
        "scrapes": scrapes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: list[dict] = []
    with TrivialServer() as server, tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for i in range(args.rounds):
            for spin, live in ((True, False), (True, True), (False, False), (False, True)):
                name = f"{i}-{int(spin)}{int(live)}"
                r = one_run(server.url, tmp, name, args.rate, args.seconds, live, spin)
                r["round"] = i
                runs.append(r)
                print(
                    f"round {i} {'spin' if spin else 'sleep'} {'B' if live else 'A'}: lag p50 "
                    f"{r['lag_p50_ms']:.3f} p99 {r['lag_p99_ms']:.3f} ms, achieved "
                    f"{r['achieved']:.0f}/s, CPU {r['cpu_s']:.2f} s, scrapes {r['scrapes']}",
                    flush=True,
                )
    a = [r for r in runs if r["spin"] and not r["live"]]
    b = [r for r in runs if r["spin"] and r["live"]]
    ratios = [rb["lag_p99_ms"] / ra["lag_p99_ms"] for ra, rb in zip(a, b, strict=True)]
    a0 = [r for r in runs if not r["spin"] and not r["live"]]
    b0 = [r for r in runs if not r["spin"] and r["live"]]
    added_us = [
        (rb["cpu_s"] - ra["cpu_s"]) / rb["sent"] * 1e6 for ra, rb in zip(a0, b0, strict=True)
    ]

    def median(side: list[dict], key: str, scale: float = 1.0) -> float:
        return statistics.median(r[key] / (r["sent"] if scale != 1.0 else 1) * scale for r in side)

    summary = {
        "lag_p99_ms_median": {"A": median(a, "lag_p99_ms"), "B": median(b, "lag_p99_ms")},
        "lag_p99_ratio_geomean": float(np.exp(np.mean(np.log(ratios)))),
        "cpu_us_per_request_median": {
            "A": median(a0, "cpu_s", 1e6),
            "B": median(b0, "cpu_s", 1e6),
        },  # --spin-us 0
        "added_cpu_us_per_request_median": statistics.median(added_us),
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
