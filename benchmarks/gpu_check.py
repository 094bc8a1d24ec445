"""One short GPU session for the reference server's torch engine (about 7 minutes on an H200).

Phases, each recorded even when an earlier one failed:

1. environment  torch, CUDA, device name
2. gpu tests    `pytest tests/reference_server/test_torch_backend.py -m gpu`
3. decode       the torch backend alone, per preset (`medium`, then `large` if the time
                budget allows): decode tokens/s at batch 1..64 with CUDA graphs, and the
                graph-vs-eager step time at each batch; prefill at 64 and 512 tokens
4. server       `python -m reference_server --engine torch --device cuda --preset medium`,
                POST /start_profile, `zqbench run smoke` against it, POST /stop_profile;
                dispatch_delay p50/p99 (summary.json) and per-request GPU time
                (srv_gpu_ms in samples.parquet)
5. schedulers   `zqbench run burst` (scaled) on the embedded server, torch engine with CUDA
                graphs, once per scheduler (zero-queue, fifo): dispatch delay, server_queue
                (the client's metric and the server's own queue time), TTFT, decode tokens/s
                and gpu_density (--telemetry auto: NVML)
6. profile      `zqbench profile nsys --capture-stage pulse` of the same burst when nsys is
                on PATH, else `zqbench profile torch` (torch.profiler on CUDA): the capture's
                files, its request ranges, its top kernels or ops

Writes gpu_check.json and gpu_check.md (and the zqbench outputs) under `--out`, default
`$OUT` when set, else docs/gpu/. Exit code 0 when every phase passed, 1 when one failed,
2 when there is no CUDA (one line says so).

`--dry-run` runs everything on CPU with the tiny preset and fewer steps, to check the
script itself on a machine without a GPU (output in a temporary folder unless --out); its
GPU-tests phase is marked skipped, as every test in it needs CUDA.

    python benchmarks/gpu_check.py                  # on the GPU machine
    .venv/bin/python benchmarks/gpu_check.py --dry-run
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCHES = [1, 2, 4, 8, 16, 32, 64]
MAX_SEQ_LEN = 512  # 64-token prompts + warm-up + timed steps fit; graphs attend over all of it


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


# ---- phases -------------------------------------------------------------------------


def phase_environment(dry: bool) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "cuda_available": cuda,
        "cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name() if cuda else None,
        "python": platform.python_version(),
        "dry_run": dry,
    }


def phase_gpu_tests() -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
           "tests/reference_server/test_torch_backend.py"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return {"command": " ".join(cmd[2:]), "returncode": proc.returncode, "summary": tail[-1:]}


def phase_decode(preset: str, device: str, batches: list[int], steps: int) -> dict[str, Any]:
    """Decode with CUDA graphs and eagerly at each batch size, then prefill, one preset."""
    import torch

    from benchmarks.torch_backend import bench_decode, bench_prefill
    from reference_server.model.torch_runner import TorchBackend

    out: dict[str, Any] = {"preset": preset, "device": device, "max_seq_len": MAX_SEQ_LEN}
    modes = [("graph", True), ("eager", False)] if device == "cuda" else [("eager", False)]
    per_mode: dict[str, dict[int, dict[str, Any]]] = {}
    for mode, graphs in modes:
        backend = TorchBackend(preset=preset, device=device, max_slots=max(batches),
                               max_seq_len=MAX_SEQ_LEN, use_cuda_graphs=graphs)  # fmt: skip
        t = time.perf_counter()
        backend.warmup()  # captures every graph bucket on CUDA
        out[f"{mode}_warmup_s"] = round(time.perf_counter() - t, 2)
        out["param_count"] = backend.param_count
        out["kv_cache_bytes"] = backend.kv_cache_bytes()
        per_mode[mode] = {b: bench_decode(backend, b, steps, 5) for b in batches}
        if mode == modes[0][0]:
            out["prefill"] = [bench_prefill(backend, n, 5) for n in (64, 512 - 1)]
        del backend
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    rows = []
    for b in batches:
        row: dict[str, Any] = {"batch": b}
        for mode in per_mode:
            r = per_mode[mode][b]
            row[f"{mode}_p50_ms"] = r["wall_p50_ms"]
            row[f"{mode}_gpu_p50_ms"] = r["gpu_p50_ms"]
            row[f"{mode}_tokens_per_s"] = round(r["tokens_per_s"], 1)
        if "graph" in per_mode:
            row["eager_over_graph"] = round(row["eager_p50_ms"] / row["graph_p50_ms"], 2)
        rows.append(row)
    out["decode"] = rows
    return out


def _post(url: str) -> dict[str, Any]:
    import httpx

    r = httpx.post(url, timeout=30)
    return {"status": r.status_code, "body": r.json()}


def phase_server(out_dir: Path, device: str, preset: str) -> dict[str, Any]:
    """Start the server on `device`, drive `zqbench run smoke` against it, read the results."""
    import pyarrow.parquet as pq

    from tests.reference_server.conftest import MODEL, start_server

    args = ("--engine", "torch", "--device", device, "--preset", preset,
            "--max-batch-size", "16", "--max-context", "512")  # fmt: skip
    t = time.perf_counter()
    server = start_server(*args, wait_s=240)
    res: dict[str, Any] = {"server_args": " ".join(args), "startup_s": 0.0}
    res["startup_s"] = round(time.perf_counter() - t, 1)
    zq_out = out_dir / "zqbench-smoke"
    try:
        # Exercise the Nsight switches; harmless without a profiler attached (400 on CPU).
        res["start_profile"] = _post(server.url + "/start_profile")
        cmd = [sys.executable, "-m", "zqbench", "run", "smoke", "--target", server.url,
               "--model", MODEL, "--out", str(zq_out), "--quiet"]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
        res["stop_profile"] = _post(server.url + "/stop_profile")
    finally:
        server.stop()
    res["zqbench_returncode"] = proc.returncode
    res["zqbench_tail"] = (proc.stdout + proc.stderr).strip().splitlines()[-4:]
    summary = json.loads((zq_out / "summary.json").read_text())
    m = summary["metrics"]
    res["status_codes"] = summary["status_codes"]
    for name in ("dispatch_delay", "server_queue", "ttft", "latency"):
        res[f"{name}_p50_ms"] = _scaled(m.get(name, {}).get("p50"), 1e3)
        res[f"{name}_p99_ms"] = _scaled(m.get(name, {}).get("p99"), 1e3)
    gpu = [x for x in pq.read_table(zq_out / "samples.parquet", columns=["srv_gpu_ms"])
           .column("srv_gpu_ms").to_pylist() if x is not None]  # fmt: skip
    res["srv_gpu_ms"] = {
        "n": len(gpu),
        "p50": statistics.median(gpu) if gpu else None,
        "max": max(gpu) if gpu else None,
        "mean": statistics.fmean(gpu) if gpu else None,
    }
    return res


def _burst_args(device: str, preset: str, dry: bool) -> list[str]:
    """The burst scenario, scaled to a short run; the embedded server on `device`."""
    scale = ["--rate-scale", "0.02", "--duration-scale", "0.03", "--max-tokens", "8"] if dry \
        else ["--rate-scale", "0.5", "--duration-scale", "0.2", "--max-tokens", "64"]  # fmt: skip
    return [*scale, "--server-engine", "torch", f"--server-arg=--device={device}",
            f"--server-arg=--preset={preset}", "--quiet"]  # fmt: skip


def _zqbench(args: list[str], timeout_s: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "zqbench", *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-4:]
    return {"command": "zqbench " + " ".join(args), "returncode": proc.returncode, "tail": tail}


def phase_schedulers(out_dir: Path, device: str, preset: str, dry: bool) -> dict[str, Any]:
    """The burst on each scheduler: the figures the zero-queue claim rests on."""
    res: dict[str, Any] = {}
    # The dry run checks the script's plumbing: no prompt calibration (2 s a run on a CPU).
    telemetry = ["--calibration", "off"] if dry else ["--telemetry", "auto"]
    for scheduler in ("zero-queue", "fifo"):
        run_dir = out_dir / f"zqbench-burst-{scheduler}"
        run = _zqbench(["run", "burst", "--out", str(run_dir), "--server-scheduler", scheduler,
                        *telemetry, *_burst_args(device, preset, dry)], 600)  # fmt: skip
        summary = json.loads((run_dir / "summary.json").read_text())
        m = summary["metrics"]
        queue = summary.get("server_queue") or {}
        run.update(
            status_codes=summary["status_codes"],
            dispatch_delay_p99_ms=_scaled(m.get("dispatch_delay", {}).get("p99"), 1e3),
            server_queue_p99_ms=_scaled(m.get("server_queue", {}).get("p99"), 1e3),
            server_queue_time_p99_ms=_scaled((queue.get("queue_time") or {}).get("p99"), 1e3),
            ttft_p50_ms=_scaled(m.get("ttft", {}).get("p50"), 1e3),
            ttft_p99_ms=_scaled(m.get("ttft", {}).get("p99"), 1e3),
            output_tokens_per_s=summary["throughput"].get("output_tokens_per_s"),
            gpu_density=summary["telemetry"].get("gpu_density"),
        )
        res[scheduler] = run
    return res


def phase_profile(out_dir: Path, device: str, preset: str, dry: bool) -> dict[str, Any]:
    """One short capture of the burst's pulse: nsys when there, else torch.profiler."""
    import shutil

    tool = "nsys" if shutil.which("nsys") and not dry else "torch"
    run_dir = out_dir / f"zqbench-profile-{tool}"
    run = _zqbench(["profile", tool, "burst", "--capture-stage", "pulse",
                    "--out", str(run_dir), *_burst_args(device, preset, dry)], 600)  # fmt: skip
    prof = json.loads((run_dir / "summary.json").read_text()).get("profile") or {}
    run.update(
        tool=tool,
        window=[prof.get("started_at"), prof.get("stopped_at")],
        artifacts=prof.get("artifacts"),
        request_ranges=prof.get("request_ranges"),
        top=[(op["name"], op["total_ms"]) for op in prof.get("top_ops", [])[:5]],
        slowest=[(r["request_id"], r["ttft"]) for r in prof.get("slowest", [])[:3]],
        notes=prof.get("notes"),
    )
    return run


def _scaled(x: float | None, k: float) -> float | None:
    return None if x is None else round(x * k, 3)


# ---- report -------------------------------------------------------------------------


def markdown(doc: dict[str, Any]) -> str:
    env = doc["phases"].get("environment", {}).get("result", {})
    lines = [
        "# GPU check of the reference server's torch engine" + (" (DRY RUN, CPU)" if
                                                                  doc["dry_run"] else ""),
        "",
        f"`{doc['command']}` — {doc['started_at']}, {doc['elapsed_s']:.0f} s, "
        f"device {env.get('device_name') or 'cpu'}, torch {env.get('torch')} "
        f"(CUDA {env.get('cuda_version')}).",
        "",
    ]  # fmt: skip
    for name, phase in doc["phases"].items():
        lines.append(f"## {name}: {phase['status']} ({phase['seconds']:.1f} s)")
        lines.append("")
        if phase["status"] != "ok":
            lines += ["```", phase.get("error", ""), "```", ""]
            continue
        r = phase["result"]
        if name == "gpu tests":
            lines += [f"`{r['command']}` → exit {r['returncode']}: {' '.join(r['summary'])}", ""]
        elif name.startswith("decode"):
            modes = [m for m in ("graph", "eager") if f"{m}_p50_ms" in r["decode"][0]]
            head = "| batch | " + " | ".join(
                f"{m} step p50 ms | {m} GPU p50 ms | {m} tokens/s" for m in modes
            )
            ratio = "graph" in modes
            lines += [
                f"preset `{r['preset']}` ({r['param_count'] / 1e6:.1f} M params), "
                f"max_seq_len {r['max_seq_len']}, KV cache {r['kv_cache_bytes'] / 2**20:.0f} MiB",
                "",
                head + (" | eager / graph |" if ratio else " |"),
                "|" + "---:|" * (1 + 3 * len(modes) + ratio),
            ]
            for row in r["decode"]:
                cells = [str(row["batch"])]
                for m in modes:
                    cells += [_ms(row[f"{m}_p50_ms"]), _ms(row[f"{m}_gpu_p50_ms"]),
                              f"{row[f'{m}_tokens_per_s']:.0f}"]  # fmt: skip
                if ratio:
                    cells.append(f"{row['eager_over_graph']:.2f}")
                lines.append("| " + " | ".join(cells) + " |")
            pre = ", ".join(
                f"{p['prompt_tokens']} tokens {_ms(p['wall_p50_ms'])} ms" for p in r["prefill"]
            )
            lines += ["", f"Prefill (one prompt, p50): {pre}.", ""]
        elif name == "server":
            g = r["srv_gpu_ms"]
            lines += [
                f"`python -m reference_server {r['server_args']}` (ready in "
                f"{r['startup_s']} s), `zqbench run smoke`: exit {r['zqbench_returncode']}, "
                f"status codes {r['status_codes']}",
                "",
                "| metric | p50 ms | p99 ms |",
                "|---|---:|---:|",
            ]
            for metric in ("dispatch_delay", "server_queue", "ttft", "latency"):
                lines.append(
                    f"| {metric} | {_ms(r[f'{metric}_p50_ms'])} | {_ms(r[f'{metric}_p99_ms'])} |"
                )
            lines += [
                "",
                f"Per-request GPU time (srv_gpu_ms): n={g['n']}, p50 {_ms(g['p50'])} ms, "
                f"mean {_ms(g['mean'])} ms, max {_ms(g['max'])} ms.",
                f"/start_profile → {r['start_profile']['status']}, "
                f"/stop_profile → {r['stop_profile']['status']}.",
                "",
            ]
        elif name == "schedulers":
            lines += [
                "| scheduler | dispatch delay p99 ms | server_queue p99 ms | server queue time "
                "p99 ms | TTFT p50 ms | TTFT p99 ms | output tokens/s | gpu_density | status |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---|",
            ]
            for sched, x in r.items():
                density = x["gpu_density"]
                lines.append(
                    f"| {sched} | {_ms(x['dispatch_delay_p99_ms'])} | "
                    f"{_ms(x['server_queue_p99_ms'])} | {_ms(x['server_queue_time_p99_ms'])} | "
                    f"{_ms(x['ttft_p50_ms'])} | {_ms(x['ttft_p99_ms'])} | "
                    f"{x['output_tokens_per_s'] or 0:.0f} | "
                    f"{'—' if density is None else f'{density:.3f}'} | {x['status_codes']} |"
                )
            lines.append("")
        elif name == "profile":
            top = ", ".join(f"`{n}` {ms:.1f} ms" for n, ms in r["top"])
            slow = ", ".join(f"{rid} ({ttft * 1e3:.1f} ms)" for rid, ttft in r["slowest"])
            lines += [
                f"`{r['command']}` → exit {r['returncode']}; captured {r['window'][0]} s to "
                f"{r['window'][1]} s with {r['tool']}: {r['request_ranges']} request ranges.",
                "",
                f"Files: {', '.join(r['artifacts'] or [])}. Top: {top or '—'}.",
                f"Slowest TTFT in the window: {slow or '—'}. Notes: {r['notes'] or 'none'}.",
                "",
            ]
        else:
            lines += ["```", json.dumps(r, indent=1), "```", ""]
    return "\n".join(lines)


# ---- main ---------------------------------------------------------------------------


def _run_phase(doc: dict[str, Any], name: str, fn: Any, *args: Any) -> None:
    t = time.perf_counter()
    print(f"gpu_check: {name} ...", flush=True)
    try:
        doc["phases"][name] = {"status": "ok", "result": fn(*args)}
    except Exception as exc:  # record and go on: one failed phase must not hide the others
        doc["phases"][name] = {
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
        }
    doc["phases"][name]["seconds"] = round(time.perf_counter() - t, 1)
    print(f"gpu_check: {name} {doc['phases'][name]['status']} "
          f"({doc['phases'][name]['seconds']} s)", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="output folder (default: $OUT, else docs/gpu/)")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny preset, fewer steps")
    p.add_argument("--presets", default="medium,large", help="decode presets, in order")
    p.add_argument("--budget-s", type=float, default=300, help="skip later presets past this")
    args = p.parse_args(argv)

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA device; run with --dry-run "
              "to check the script on CPU", file=sys.stderr)  # fmt: skip
        return 2
    if args.out is not None:
        out_dir = args.out
    elif args.dry_run:
        out_dir = Path(tempfile.mkdtemp(prefix="gpu_check-dry-run-"))
    else:
        out_dir = Path(os.environ.get("OUT") or ROOT / "docs" / "gpu")
    out_dir.mkdir(parents=True, exist_ok=True)

    device = "cpu" if args.dry_run else "cuda"
    presets = ["tiny"] if args.dry_run else args.presets.split(",")
    batches = [1, 2, 4, 8] if args.dry_run else BATCHES
    steps = 20 if args.dry_run else 50
    t0 = time.perf_counter()
    doc: dict[str, Any] = {
        "schema": "zqbench.gpu_check/1",
        "command": "python benchmarks/gpu_check.py " + " ".join(argv or sys.argv[1:]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "dry_run": args.dry_run,
        "phases": {},
    }
    _run_phase(doc, "environment", phase_environment, args.dry_run)
    if args.dry_run:  # every test it runs needs CUDA: on a CPU they would all skip
        doc["phases"]["gpu tests"] = {"status": "skipped", "seconds": 0.0,
                                      "error": "dry run: the GPU tests need CUDA"}  # fmt: skip
    else:
        _run_phase(doc, "gpu tests", phase_gpu_tests)
    for i, preset in enumerate(presets):
        if i > 0 and time.perf_counter() - t0 > args.budget_s / 2:
            print(f"gpu_check: skipping decode {preset}: past half the time budget")
            continue
        _run_phase(doc, f"decode {preset}", phase_decode, preset, device, batches, steps)
    _run_phase(doc, "server", phase_server, out_dir, device, presets[0])
    _run_phase(doc, "schedulers", phase_schedulers, out_dir, device, presets[0], args.dry_run)
    _run_phase(doc, "profile", phase_profile, out_dir, device, presets[0], args.dry_run)
    doc["elapsed_s"] = round(time.perf_counter() - t0, 1)

    (out_dir / "gpu_check.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out_dir / "gpu_check.md").write_text(markdown(doc) + "\n")
    failed = [n for n, ph in doc["phases"].items() if ph["status"] == "failed"]
    skipped = [n for n, ph in doc["phases"].items() if ph["status"] == "skipped"]
    print(f"gpu_check: wrote {out_dir}/gpu_check.md and .json in {doc['elapsed_s']:.0f} s; "
          + (f"FAILED: {', '.join(failed)}" if failed else "all phases ok")
          + (f" (skipped: {', '.join(skipped)})" if skipped else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
