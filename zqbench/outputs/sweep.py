"""sweep.md, the Markdown of a `zqbench sweep` (sweep.json is `SweepReport.to_json()`;
zqbench.outputs.registry writes both).

`report` is what `zqbench.sweep.run_sweep` builds: the steps in the order they ran, the
same steps sorted by rate (`curve`), and the knee.
"""

from __future__ import annotations

from zqbench.outputs.view import ms
from zqbench.summary import SweepReport


def render_sweep_md(report: SweepReport) -> str:
    """The knee in bold, then one table row per step, by rate."""
    knee = report.knee
    head = (
        f"**capacity at SLO: {knee.rate:g} req/s** (step {knee.step})"
        if knee
        else "**no passing rate**: the SLOs fail even at the lowest rate"
    )
    lines = [
        f"## zqbench sweep · `{report.scenario}` → `{report.target}`",
        "",
        head,
        "",
        "SLOs: " + ", ".join(f"`{s}`" for s in report.slos),
        "",
        "| rate (req/s) | phase | verdict | sent | latency p50 (ms) | p99 (ms) | ttft p99 (ms) |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for s in report.curve:
        lines.append(
            f"| {s.rate:g} | {s.phase} | {s.verdict} | {s.sent:,} |"
            f" {ms(s.latency_p50)} | {ms(s.latency_p99)} | {ms(s.ttft_p99)} |"
        )
    return "\n".join([*lines, ""])
