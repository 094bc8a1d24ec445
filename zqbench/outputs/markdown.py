"""summary.md: a short Markdown page for a CI job summary ($GITHUB_STEP_SUMMARY).

A renderer of the saved summary dict: it computes nothing new. Verdict line, SLO table,
key metrics per stage and class (milliseconds), unavailable metrics, status mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zqbench.outputs.json_out import write_atomic
from zqbench.outputs.redact import redact

VERDICT_BADGE = {
    "pass": "✅ PASS",
    "fail": "❌ FAIL",
    "inconclusive": "⚠️ INCONCLUSIVE",
    "invalid": "🚫 INVALID",
}
KEY_METRICS = (
    "latency",
    "latency_error_adjusted",
    "latency_corrected",
    "ttft",
    "tpot",
    "itl",
    "time_to_reject",
    "schedule_lag",
    "server_queue",
    "dispatch_delay",
    "dispatch_jitter",
)
COLUMNS = ("p50", "p90", "p99", "p999", "max")


def _ms(value: Any) -> str:
    """Seconds (or "inf" / null) as milliseconds with 4 significant digits."""
    if value is None:
        return "–"
    if value == "inf":
        return "∞"
    return f"{float(value) * 1e3:.4g}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _stage_label(summary: Mapping[str, Any], key: str) -> str:
    names = {str(s["index"]): s["name"] for s in summary.get("stages", [])}
    return f"stage {key} ({names[key]})" if key in names else f"stage {key}"


def _metric_rows(summary: Mapping[str, Any], name: str, entry: Mapping[str, Any]) -> list[str]:
    def row(group: str, stats: Mapping[str, Any]) -> str:
        cells = [f"`{name}`", _cell(group), f"{stats.get('n', 0):,}"]
        cells += [_ms(stats.get(col)) for col in COLUMNS]
        return "| " + " | ".join(cells) + " |"

    rows = [row("all", entry)]
    by_stage = entry.get("by_stage", {})
    if len(by_stage) > 1:
        rows += [row(_stage_label(summary, k), v) for k, v in by_stage.items()]
    by_class = entry.get("by_class", {})
    if len(by_class) > 1:
        rows += [row(f"class {k}", v) for k, v in by_class.items()]
    return rows


def render_summary_md(summary: Mapping[str, Any]) -> str:
    """The summary.md text of a (redacted) summary dict."""
    summary = redact(dict(summary))
    verdict = summary["verdict"]
    requests = summary["requests"]
    scenario = summary["scenario"]["name"]
    lines = [
        f"## zqbench: {VERDICT_BADGE.get(verdict, verdict)} · `{scenario}` → `{summary['target']}`",
        "",
    ]
    throughput = summary.get("throughput", {})
    rate = throughput.get("requests_per_s")
    goodput = throughput.get("goodput_per_s")
    facts = (
        f"{requests['sent']:,} requests sent, {requests['ok']:,} ok, {requests['failed']:,}"
        f" failed in {summary['duration']:.1f} s"
    )
    if rate is not None:
        facts += f" · {rate:.1f} req/s ok"
    if goodput is not None:
        facts += f" · goodput {goodput:.1f} req/s"
    lines += [f"{facts} · started {summary['started_at']} · api `{summary['api']}`", ""]

    validity = summary["validity"]
    if not validity["ok"]:
        lines += ["**The run is invalid** (its numbers do not describe the target):", ""]
        lines += [f"- {reason}" for reason in validity["reasons"]] + [""]

    if summary["slos"]:
        lines += ["### SLOs", "", "| SLO | verdict | detail |", "| --- | --- | --- |"]
        for slo in summary["slos"]:
            badge = VERDICT_BADGE.get(slo["verdict"], slo["verdict"])
            lines.append(f"| `{_cell(slo['expr'])}` | {badge} | {_cell(slo['message'])} |")
        lines.append("")

    lines += [
        "### Key metrics (ms)",
        "",
        "| metric | group | n | p50 | p90 | p99 | p99.9 | max |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    unavailable = []
    for name in KEY_METRICS:
        entry = summary["metrics"].get(name)
        if entry is None:
            continue
        if "unavailable" in entry:
            unavailable.append(f"- `{name}`: {entry['unavailable']}")
            continue
        lines += _metric_rows(summary, name, entry)
    lines.append("")
    if unavailable:
        lines += ["Unavailable (no value, not zero):", "", *unavailable, ""]

    ratios = summary.get("ratios", {})
    ratio_rows = [
        f"| `{name}` | {entry['p99_p50']:.3g} | {entry['worst_class']} |"
        for name, entry in ratios.items()
        if isinstance(entry.get("p99_p50"), (int, float))
    ]
    if ratio_rows:
        lines += ["| metric | p99/p50 | worst class |", "| --- | ---: | --- |"]
        lines += [*ratio_rows, ""]

    lines += ["### Status mix", "", "| status | count | share |", "| --- | ---: | ---: |"]
    total = max(1, requests["sent"])
    for key, count in summary["status_codes"].items():
        lines.append(f"| `{_cell(key)}` | {count:,} | {count / total:.2%} |")
    lines.append("")
    return "\n".join(lines)


def write_summary_md(summary: Mapping[str, Any], path: Path) -> Path:
    return write_atomic(Path(path), render_summary_md(summary))
