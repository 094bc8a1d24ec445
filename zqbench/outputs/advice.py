"""advice.md and the terminal's lines of `zqbench sweep --server-cmd` (advice.json is
`AdviceReport.to_json()`, plots/advice.png is `zqbench.outputs.plots.advice`;
zqbench.outputs.registry writes all three).

`report` is what `zqbench.pipeline.advise.run_advisor` builds: one row per setting, in the
order they ran, and the recommendation. The figures' words (`rate`, `share`, `figures`)
are shared with the recommendation's sentence, so a number reads the same everywhere.
"""

from __future__ import annotations

from zqbench.metrics.sections.text import ms, ms_text
from zqbench.outputs.advice_model import AdviceReport, SettingResult
from zqbench.outputs.templating import code, markdown_text

__all__ = ["figures", "ms_text", "rate", "render_advice_md", "setting_line", "share"]


def rate(value: float | None) -> str:
    """Requests per second, 3 significant digits."""
    return "-" if value is None else f"{value:.3g} req/s"


def share(value: float | None) -> str:
    """A share as a percentage: 0%, 2.5%, 41%."""
    if value is None:
        return "-"
    if value == 0:
        return "0%"
    return f"{value:.1%}" if value < 0.1 else f"{value:.0%}"


def figures(s: SettingResult) -> str:
    """`9.8 req/s admitted, none of them queued, TTFT p99 120 ms, 41% refused
    (time_to_reject p99 3 ms)`"""
    parts = [
        f"{rate(s.admitted_per_s)} admitted",
        "none of them queued" if not s.queued else f"{share(s.queued_share)} of them queued",
        f"TTFT p99 {ms_text(s.ttft_p99)}",
    ]
    if s.refused:
        parts.append(
            f"{share(s.refusal_share)} refused (time_to_reject p99 {ms_text(s.time_to_reject_p99)})"
        )
    else:
        parts.append("none refused")
    return ", ".join(parts)


def setting_line(s: SettingResult) -> str:
    """The terminal's line for a finished setting."""
    if s.state != "ran":
        tail = f" (log: {s.log_tail[-1]})" if s.log_tail else ""
        return f"setting {s.index:>2} {s.label}: {s.state}: {s.error}{tail}"
    false = "-" if s.false_refusals is None else f"{s.false_refusals:,}"
    return (
        f"setting {s.index:>2} {s.label}: {s.verdict}, {rate(s.admitted_per_s)} admitted, "
        f"queued {share(s.queued_share)}, false refusals {false}, "
        f"TTFT p99 {ms_text(s.ttft_p99)}, time_to_reject p99 {ms_text(s.time_to_reject_p99)}, "
        f"refused {share(s.refusal_share)}"
    )


def render_advice_md(report: AdviceReport) -> str:
    """The outcome in bold, one table row per setting, then each failed launch's log."""
    rec = report.recommendation
    lines = [
        f"## zqbench sweep --server-cmd · {code(report.scenario)} → {code(report.target)}",
        "",
        f"**{markdown_text(report.outcome)}**",
        "",
        f"Command: {code(report.command)}",
        "",
        "SLOs: " + (", ".join(code(s) for s in report.slos) or "none"),
        "",
        "| setting | verdict | admitted (req/s) | queued (of admitted) | false refusals |"
        " TTFT p99 (ms) | time_to_reject p99 (ms) | refused (of sent) | ready (s) | folder |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in report.settings:
        mark = " (recommended)" if rec is not None and rec.setting == s.index else ""
        verdict = s.verdict if s.state == "ran" else s.state
        false = "-" if s.false_refusals is None else f"{s.false_refusals:,}"
        ready = "-" if s.ready_s is None else f"{s.ready_s:.1f}"
        speed = "-" if s.admitted_per_s is None else f"{s.admitted_per_s:.3g}"
        lines.append(
            f"| {code(s.label)}{mark} | {verdict} | {speed} | {share(s.queued_share)} | {false} |"
            f" {ms(s.ttft_p99)} | {ms(s.time_to_reject_p99)} | {share(s.refusal_share)} |"
            f" {ready} | {code(s.out_dir)} |"
        )
    for s in report.settings:
        if s.state == "ran":
            continue
        lines += ["", f"### {code(s.label)}: {s.state}", "", markdown_text(s.error or "")]
        if s.log_tail:
            # Indented code, not a fence: a log line of ``` cannot end it.
            lines += ["", "Its log's last lines:", "", *(f"    {line}" for line in s.log_tail)]
    return "\n".join([*lines, ""])
