"""The outputs of `zqbench sweep`: sweep.json (schema `zqbench.sweep/1`) and sweep.md.

    write_sweep(out_dir, report)  -> [sweep.json, sweep.md]

`report` is the dict `zqbench.sweep.run_sweep` builds: the steps in the order they ran,
the same steps sorted by rate (`curve`), and the knee.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zqbench.outputs.json_out import write_atomic

SCHEMA = "zqbench.sweep/1"
SWEEP_JSON = "sweep.json"
SWEEP_MD = "sweep.md"


def write_sweep(out_dir: Path, report: dict[str, Any]) -> list[Path]:
    return [
        write_atomic(out_dir / SWEEP_JSON, json.dumps(report, indent=2) + "\n"),
        write_atomic(out_dir / SWEEP_MD, render_sweep_md(report)),
    ]


def render_sweep_md(report: dict[str, Any]) -> str:
    """The knee in bold, then one table row per step, by rate."""
    knee = report["knee"]
    head = (
        f"**capacity at SLO: {knee['rate']:g} req/s** (step {knee['step']})"
        if knee
        else "**no passing rate**: the SLOs fail even at the lowest rate"
    )
    lines = [
        f"## zqbench sweep · `{report['scenario']}` → `{report['target']}`",
        "",
        head,
        "",
        "SLOs: " + ", ".join(f"`{s}`" for s in report["slos"]),
        "",
        "| rate (req/s) | phase | verdict | sent | latency p50 (ms) | p99 (ms) | ttft p99 (ms) |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for s in report["curve"]:
        lines.append(
            f"| {s['rate']:g} | {s['phase']} | {s['verdict']} | {s['sent']:,} |"
            f" {_ms(s['latency_p50'])} | {_ms(s['latency_p99'])} | {_ms(s['ttft_p99'])} |"
        )
    return "\n".join([*lines, ""])


def _ms(seconds: Any) -> str:
    """Seconds (a float, "inf" or None) as milliseconds for the table."""
    if seconds is None:
        return "–"
    return "∞" if seconds == "inf" else f"{float(seconds) * 1e3:.4g}"
