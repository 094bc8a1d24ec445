"""Step times of the reference server's PyTorch backend, outside any server.

Decode: for each batch size, fill that many slots with 64-token prompts, time `--steps`
decode steps (after `--warmup-steps` untimed ones) and report p50/p99 step time and
tokens/s (batch size x steps / summed step time). Prefill: time one prompt of each length,
`--repeats` times, and report the median. Times are the backend's own `StepTiming`
(host wall time; device time from CUDA events on CUDA).

    .venv/bin/python benchmarks/torch_backend.py --preset tiny
    python benchmarks/torch_backend.py --device cuda --preset medium --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from pathlib import Path

from reference_server.backend import SamplingParams
from reference_server.model.torch_runner import TorchBackend

PROMPT_TOKEN = ord("a")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def bench_decode(backend: TorchBackend, batch: int, steps: int, warmup_steps: int) -> dict:
    slots = list(range(batch))
    prompts = [[PROMPT_TOKEN] * 64 for _ in slots]
    last, _ = backend.prefill(slots, prompts, [SamplingParams()] * batch)
    wall, gpu = [], []
    for step in range(warmup_steps + steps):
        last, timing = backend.decode(slots, last)
        if step >= warmup_steps:
            wall.append(timing.wall_ms)
            if timing.gpu_ms is not None:
                gpu.append(timing.gpu_ms)
    for slot in slots:
        backend.release(slot)
    return {
        "batch": batch,
        "steps": steps,
        "wall_p50_ms": percentile(wall, 50),
        "wall_p99_ms": percentile(wall, 99),
        "gpu_p50_ms": percentile(gpu, 50) if gpu else None,
        "tokens_per_s": batch * steps / (sum(wall) / 1000),
    }


def bench_prefill(backend: TorchBackend, length: int, repeats: int) -> dict:
    wall, gpu = [], []
    for _ in range(repeats + 1):  # the first run is untimed (allocations, kernel choice)
        _, timing = backend.prefill([0], [[PROMPT_TOKEN] * length], [SamplingParams()])
        backend.release(0)
        wall.append(timing.wall_ms)
        if timing.gpu_ms is not None:
            gpu.append(timing.gpu_ms)
    return {
        "prompt_tokens": length,
        "wall_p50_ms": percentile(wall[1:], 50),
        "gpu_p50_ms": percentile(gpu[1:], 50) if gpu else None,
    }


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def markdown(result: dict) -> str:
    cfg = result["config"]
    lines = [
        f"preset `{cfg['preset']}` ({cfg['param_count'] / 1e6:.2f} M params), device "
        f"`{cfg['device']}`, cuda graphs {cfg['cuda_graphs']}, max_seq_len {cfg['max_seq_len']}",
        "",
        "| decode batch | p50 ms | p99 ms | GPU p50 ms | tokens/s |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["decode"]:
        lines.append(
            f"| {row['batch']} | {fmt(row['wall_p50_ms'])} | {fmt(row['wall_p99_ms'])} "
            f"| {fmt(row['gpu_p50_ms'])} | {row['tokens_per_s']:.0f} |"
        )
    lines += ["", "| prefill tokens | p50 ms | GPU p50 ms |", "| ---: | ---: | ---: |"]
    for row in result["prefill"]:
        lines.append(
            f"| {row['prompt_tokens']} | {fmt(row['wall_p50_ms'])} | {fmt(row['gpu_p50_ms'])} |"
        )
    return "\n".join(lines)


def parse_ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-sizes", type=parse_ints, default=[1, 2, 4, 8])
    parser.add_argument("--prompt-lengths", type=parse_ints, default=[64, 256])
    parser.add_argument("--steps", type=int, default=100, help="timed decode steps per batch")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=10, help="timed prefills per length")
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--no-cuda-graphs", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    needed = max(64 + args.warmup_steps + args.steps + 1, max(args.prompt_lengths) + 1)
    if args.max_seq_len < needed:
        parser.error(f"--max-seq-len must be >= {needed} for these prompts and steps")
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    backend = TorchBackend(
        preset=args.preset,
        device=args.device,
        max_slots=max(args.batch_sizes),
        max_seq_len=args.max_seq_len,
        seed=args.seed,
        use_cuda_graphs=not args.no_cuda_graphs,
    )
    backend.warmup()

    import torch  # after the backend: it validated the device first

    result = {
        "schema": "zqbench.torch_backend_bench/1",
        "config": {
            "preset": args.preset,
            "device": backend.device,
            "device_name": torch.cuda.get_device_name() if backend.device == "cuda" else None,
            "cuda_graphs": backend.use_cuda_graphs,
            "max_seq_len": args.max_seq_len,
            "param_count": backend.param_count,
            "kv_cache_bytes": backend.kv_cache_bytes(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "decode": [
            bench_decode(backend, b, args.steps, args.warmup_steps) for b in args.batch_sizes
        ],
        "prefill": [bench_prefill(backend, n, args.repeats) for n in args.prompt_lengths],
    }
    print(markdown(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
