"""How fast and how precisely zqbench generates load, side by side with wrk and Locust.

Reproduce (about 5 minutes on 2 cores; writes Markdown to stdout and JSON to --json):

    .venv/bin/python benchmarks/loadgen.py --json docs/loadgen.json

Against a trivial loopback server (granian, RSGI, 1 worker, pinned to CPU 1), with the
generator pinned to CPU 0 where `taskset` exists:

1. open-loop sweep, one process and `--workers 2`, HTTP/1.1 and HTTP/2: for each rate,
   the achieved rate, `schedule_lag` p50/p99 (t_send - t_intended, from the raw samples),
   latency p50/p99 and zqbench's CPU seconds per 1000 requests (start-up subtracted);
   the highest rate held with lag p99 < 1 ms and achieved/offered >= 0.97;
2. closed-loop ceilings in the same run: wrk (-c 10 and -c 64) and Locust FastHttpUser;
3. accuracy: 50 concurrent streams against the programmed server (tests/servers), the
   client's TTFT minus the server's true first-token send time, per request.

Figures are ratios measured in one run: this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.servers import ProgrammedServer  # noqa: E402

ZQBENCH = [sys.executable, "-m", "zqbench"]


def taskset(cpu: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(cpu)]
    return []


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TrivialServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TrivialServer:
        cmd = [
            *taskset(1),
            str(Path(sys.executable).parent / "granian"),
            "--interface",
            "rsgi",
            "--http",
            "auto",
            "--workers",
            "1",
            "--runtime-threads",
            "1",
            "--no-access-log",
            "--port",
            str(self.port),
            "benchmarks.trivial_server:app",
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        import socket

        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("trivial server did not start")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def scenario_file(folder: Path, rate: float, seconds: float, stream: bool = False) -> Path:
    path = folder / f"bench-{rate:g}.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "loadgen-{rate:g}"
            description = "benchmark"
            api = "anthropic"
            [load]
            executor = "constant-arrival-rate"
            rate = {rate}
            duration = "{seconds}s"
            arrivals = "uniform"
            [request]
            max_tokens = 1
            stream = {"true" if stream else "false"}
            timeout = "10s"
            prompt_tokens = 16
            """
        )
    )
    return path


def run_zqbench(args: list[str], out: Path) -> tuple[float, int]:
    """Run one zqbench process; return its CPU seconds (user+sys) and exit code."""
    proc = subprocess.Popen(
        [*taskset(0), *ZQBENCH, "run", *args, "--out", str(out), "--quiet", "--calibration", "off"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr:
        err = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        if err:
            print(f"  zqbench stderr: {err[-300:]}", file=sys.stderr)
    return usage.ru_utime + usage.ru_stime, proc.returncode


def pct(values: np.ndarray, q: float) -> float:
    if len(values) == 0:
        return float("nan")
    s = np.sort(values)
    return float(s[max(1, int(np.ceil(q * len(s)))) - 1])


def measure_open(
    target: str, rate: float, seconds: float, workers: int, http2: bool, tmp: Path
) -> dict[str, Any]:
    out = tmp / f"out-{rate:g}-{workers}-{int(http2)}"
    args = [
        str(scenario_file(tmp, rate, seconds)),
        "--target",
        target,
        "--model",
        "bench",
        "--workers",
        str(workers),
        "--slo",
        "errors:rate<1",
    ]
    if http2:
        args.append("--http2")
    cpu, code = run_zqbench(args, out)
    table = pq.read_table(out / "samples.parquet").to_pandas()
    ok = table[table["error"].isna()]
    lag = (table["t_send"] - table["t_intended"]).to_numpy() / 1e6
    lat = (ok["t_end"] - ok["t_send"]).to_numpy() / 1e6
    span = (table["t_send"].max() - table["t_send"].min()) / 1e9
    achieved = (len(table) - 1) / span if span > 0 else 0.0
    return {
        "rate": rate,
        "workers": workers,
        "http2": http2,
        "sent": len(table),
        "ok": len(ok),
        "achieved": achieved,
        "lag_p50_ms": pct(lag, 0.5),
        "lag_p99_ms": pct(lag, 0.99),
        "lat_p50_ms": pct(lat, 0.5),
        "lat_p99_ms": pct(lat, 0.99),
        "cpu_s": cpu,
        "exit": code,
    }


def wrk(target: str, conns: int, seconds: int) -> dict[str, Any] | None:
    exe = shutil.which("wrk")
    if exe is None:
        return None
    out = subprocess.run(
        [*taskset(0), exe, "-t1", f"-c{conns}", f"-d{seconds}s", target + "/"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return {"tool": f"wrk -c{conns}", "req_s": float(match.group(1)) if match else None}


LOCUSTFILE = """
from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser

class Bench(FastHttpUser):
    wait_time = constant(0)

    @task
    def post(self):
        self.client.post("/v1/messages", data=b"{}", headers={"content-type": "application/json"})
"""


def locust(target: str, users: int, seconds: int, tmp: Path) -> dict[str, Any] | None:
    exe = Path(sys.executable).parent / "locust"
    if not exe.exists():
        return None
    lf = tmp / "locustfile.py"
    lf.write_text(LOCUSTFILE)
    csv = tmp / "locust"
    subprocess.run(
        [
            *taskset(0),
            str(exe),
            "-f",
            str(lf),
            "--headless",
            "-u",
            str(users),
            "-r",
            str(users),
            "-t",
            f"{seconds}s",
            "--host",
            target,
            "--csv",
            str(csv),
            "--only-summary",
        ],
        capture_output=True,
        check=False,
        cwd=tmp,
    )
    stats = Path(str(csv) + "_stats.csv")
    if not stats.exists():
        return None
    lines = stats.read_text().splitlines()
    header = lines[0].split(",")
    total = next(line.split(",") for line in lines[1:] if ",Aggregated," in line)
    rps = float(total[header.index("Requests/s")])
    return {"tool": f"locust FastHttpUser u={users}", "req_s": rps}


def stream_accuracy(tmp: Path, seconds: float) -> dict[str, Any]:
    """50 VUs streaming 64 tokens every 5 ms against the programmed server.

    Per request: the client's TTFT minus the server's true TTFT (its first-token write
    minus its read of the request), and each token's delivery delay (client stamp minus
    server write), matched by the x-request-id zqbench sends."""
    path = tmp / "streams.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            name = "streams"
            description = "50 concurrent streams"
            api = "anthropic"
            [load]
            executor = "constant-vus"
            vus = 50
            duration = "{seconds}s"
            [request]
            max_tokens = 64
            stream = true
            timeout = "10s"
            prompt_tokens = 16
            """
        )
    )
    out = tmp / "out-streams"
    with ProgrammedServer() as srv:
        cpu, code = run_zqbench(
            [
                str(path),
                "--target",
                srv.url,
                "--model",
                "bench",
                "-H",
                "x-program: /anthropic?n=64&every=5&first=5",
                "--warm-connections",
                "50",
            ],
            out,
        )
        truth = srv.all_truth()["truth"]
    table = pq.read_table(out / "samples.parquet")
    start = int(table.schema.metadata[b"zqbench.clock.start_monotonic_ns"])
    ttft_err, delivery = [], []
    for row in table.to_pylist():
        rec = truth.get(f"zq-{row['request_id']}")
        if row["error"] is not None or not rec or len(rec["t_chunks"]) < 2:
            continue
        server_ttft = rec["t_chunks"][1] - rec["t_recv"]
        client_ttft = row["t_first_token"] - row["t_send"]
        ttft_err.append((client_ttft - server_ttft) / 1e6)
        delivery.append((row["t_first_token"] + start - rec["t_chunks"][1]) / 1e6)
    errors = np.asarray(ttft_err)
    return {
        "streams": len(errors),
        "ttft_error_p50_ms": pct(errors, 0.5),
        "ttft_error_p99_ms": pct(errors, 0.99),
        "first_token_delivery_p50_ms": pct(np.asarray(delivery), 0.5),
        "first_token_delivery_p99_ms": pct(np.asarray(delivery), 0.99),
        "cpu_s": cpu,
        "exit": code,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="2000,4000,5000,6000,8000,10000")
    parser.add_argument("--h2-rates", default="500,1000,1500,2000")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    h2_rates = [float(r) for r in args.h2_rates.split(",")]
    results: dict[str, Any] = {"open_loop": [], "closed_loop": []}
    with tempfile.TemporaryDirectory() as d, TrivialServer() as srv:
        tmp = Path(d)
        base_cpu, _ = run_zqbench(
            [str(scenario_file(tmp, 1, 1)), "--target", srv.url, "--model", "b"], tmp / "base"
        )
        results["startup_cpu_s"] = base_cpu
        for workers in (1, 2):
            for rate in rates:
                row = measure_open(srv.url, rate, args.seconds, workers, False, tmp)
                results["open_loop"].append(row)
                print(json.dumps(row), file=sys.stderr)
        for rate in h2_rates:
            row = measure_open(srv.url, rate, args.seconds, 1, True, tmp)
            results["open_loop"].append(row)
            print(json.dumps(row), file=sys.stderr)
        for conns in (10, 64):
            w = wrk(srv.url, conns, int(args.seconds))
            if w:
                results["closed_loop"].append(w)
        loc = locust(srv.url, 10, int(args.seconds), tmp)
        if loc:
            results["closed_loop"].append(loc)
        results["streams"] = stream_accuracy(tmp, args.seconds)
        print(json.dumps(results["streams"]), file=sys.stderr)
    rusage = resource.getrusage(resource.RUSAGE_SELF)
    results["harness_cpu_s"] = rusage.ru_utime + rusage.ru_stime
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def render(results: dict[str, Any]) -> str:
    base = results.get("startup_cpu_s", 0.0)
    lines = [
        "| transport | workers | offered req/s | achieved req/s | lag p50 ms | lag p99 ms "
        "| latency p50 ms | latency p99 ms | CPU s / 1000 req |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["open_loop"]:
        per_k = max(0.0, r["cpu_s"] - base * r["workers"]) / max(1, r["sent"]) * 1000
        lines.append(
            f"| {'h2' if r['http2'] else 'h1'} | {r['workers']} | {r['rate']:.0f} "
            f"| {r['achieved']:.0f} | {r['lag_p50_ms']:.3f} | {r['lag_p99_ms']:.3f} "
            f"| {r['lat_p50_ms']:.2f} | {r['lat_p99_ms']:.2f} | {per_k:.3f} |"
        )
    lines.append("")
    for key, label in ((False, "HTTP/1.1"), (True, "HTTP/2")):
        for workers in (1, 2):
            held = [
                r["rate"]
                for r in results["open_loop"]
                if r["http2"] is key
                and r["workers"] == workers
                and r["lag_p99_ms"] < 1.0
                and r["achieved"] >= 0.97 * r["rate"]
            ]
            if any(r["http2"] is key and r["workers"] == workers for r in results["open_loop"]):
                best = f"{max(held):.0f} req/s" if held else "none of the rates tried"
                lines.append(f"- {label}, {workers} worker(s): highest rate held: {best}")
    st = results.get("streams")
    if st:
        lines.append("")
        lines.append(
            f"- 50 concurrent streams (64 tokens, 5 ms apart), {st['streams']} streams: "
            f"TTFT error vs the server's truth p50 {st['ttft_error_p50_ms']:.3f} ms, "
            f"p99 {st['ttft_error_p99_ms']:.3f} ms; first-token delivery delay "
            f"p50 {st['first_token_delivery_p50_ms']:.3f} ms, "
            f"p99 {st['first_token_delivery_p99_ms']:.3f} ms"
        )
    lines.append("")
    lines.append("| closed-loop tool | req/s |")
    lines.append("|---|---|")
    for r in results["closed_loop"]:
        lines.append(f"| {r['tool']} | {r['req_s']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
