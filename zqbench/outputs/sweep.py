"""sweep.md, the Markdown of a `zqbench sweep` (sweep.json is `SweepReport.to_json()`;
zqbench.outputs.registry writes both).

`report` is what `zqbench.pipeline.sweep.run_sweep` builds: the steps in the order they ran, the
same steps sorted by rate (`curve`), and the knee.
"""

from __future__ import annotations

from zqbench.outputs.templating import code, markdown_text
from zqbench.outputs.view import ms
from zqbench.summary import SweepReport

_WHY_NOT = {
    "fail": "the SLOs fail",
    "inconclusive": "the SLOs are inconclusive (too few samples to decide)",
    "invalid": "the run is invalid (the generator could not hold the rate)",
}


def outcome(report: SweepReport) -> str:
    """One line: the capacity found, or why the lowest rate did not pass (a fail, an
    inconclusive gate and an invalid run are three different stories)."""
    knee = report.knee
    if knee is not None and knee.by == "stop":
        why = report.steps[knee.step].stopped if knee.step < len(report.steps) else None
        return f"saturated at {knee.rate:g} req/s (step {knee.step}, a [stop] rule: {why})"
    if knee is not None:
        return f"capacity at SLO: {knee.rate:g} req/s (step {knee.step})"
    if not report.curve:
        return "no passing rate: no step ran"
    lowest = report.curve[0]
    why = _WHY_NOT.get(lowest.verdict, f"its verdict is {lowest.verdict}")
    return f"no passing rate: at the lowest rate, {lowest.rate:g} req/s, {why}"


def render_sweep_md(report: SweepReport) -> str:
    """The outcome in bold, then one table row per step, by rate."""
    lines = [
        f"## zqbench sweep · {code(report.scenario)} → {code(report.target)}",
        "",
        f"**{markdown_text(outcome(report))}**",
        "",
        "SLOs: " + ", ".join(code(s) for s in report.slos),
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
