"""summary.md: a short Markdown page for a CI job summary ($GITHUB_STEP_SUMMARY).

A renderer of the saved summary dict: it computes nothing new. Verdict line, SLO table,
key metrics per stage and class (milliseconds), unavailable metrics, status mix
(overall and per stage), error migration (baseline vs overload stage), refusals.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zqbench.outputs.json_out import write_atomic
from zqbench.redact import redact

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
    lines += _status_by_stage(summary)
    lines += _migration(summary.get("migration") or {})
    lines += _head_of_line(summary.get("head_of_line") or {})
    lines += _refusals(summary)
    return "\n".join(lines)


def _share(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2%}"


def _ratio(value: Any) -> str:
    return "–" if value is None else f"{float(value):.3g}"


def _status_by_stage(summary: Mapping[str, Any]) -> list[str]:
    by_stage = summary.get("status_mix", {}).get("by_stage", {})
    if len(by_stage) < 2:
        return []
    keys = list(summary["status_codes"])
    lines = ["### Status mix by stage", ""]
    lines += ["| stage | n | " + " | ".join(f"`{_cell(k)}`" for k in keys) + " |"]
    lines += ["| --- | ---: |" + " ---: |" * len(keys)]
    for stage, entry in by_stage.items():
        n = sum(entry["counts"].values())
        cells = [_cell(_stage_label(summary, stage)), f"{n:,}"]
        cells += [_share(entry["share"].get(k, 0.0)) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", "Counts per second by status: `status_mix.over_time` in summary.json.", ""]


def _migration(entry: Mapping[str, Any]) -> list[str]:
    if "baseline" not in entry:
        return []
    base, over = entry["baseline"], entry["overload"]

    def label(view: Mapping[str, Any]) -> str:
        rate = view.get("send_rate")
        return f"stage {view['stage']} ({_cell(view['name'])}, {rate:.1f} req/s)"

    lines = [
        "### Error migration: baseline vs overload",
        "",
        f"| | {label(base)} | {label(over)} |",
        "| --- | ---: | ---: |",
        f"| requests | {base['sent']:,} | {over['sent']:,} |",
    ]
    lines += [
        f"| `{_cell(row['status'])}` | {_share(row['baseline'])} | {_share(row['overload'])} |"
        for row in entry["rows"]
    ]
    lines += [
        f"| latency p50 (ms) | {_ms(base['latency_p50'])} | {_ms(over['latency_p50'])} |",
        f"| latency p99 (ms) | {_ms(base['latency_p99'])} | {_ms(over['latency_p99'])} |",
        f"| latency p99/p50 | {_ratio(base['latency_p99_p50'])}"
        f" | {_ratio(over['latency_p99_p50'])} |",
        f"| time_to_reject p99 (ms) | {_ms(base['time_to_reject_p99'])}"
        f" | {_ms(over['time_to_reject_p99'])} |",
        "",
    ]
    return lines


def _head_of_line(entry: Mapping[str, Any]) -> list[str]:
    if "by_class" not in entry:
        return []
    lines = [
        f"### Head-of-line blocking: stage {entry['mixed_stage']} (mixed) vs stage"
        f" {entry['baseline_stage']} (baseline)",
        "",
        "| class | metric | baseline p50 | mixed p50 | ratio | baseline p99 | mixed p99 | ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for cls, metrics in entry["by_class"].items():
        for metric, row in metrics.items():
            cells = [_cell(cls), f"`{metric}`"]
            for q in ("p50", "p99"):
                cells += [
                    f"{_ms(row[f'baseline_{q}'])} ms",
                    f"{_ms(row[f'mixed_{q}'])} ms",
                    _ratio(row[f"ratio_{q}"]),
                ]
            lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _refusals(summary: Mapping[str, Any]) -> list[str]:
    entry = summary.get("retry_after") or {}
    if "refusals" not in entry:
        return []
    reject = summary["metrics"].get("time_to_reject", {})
    return [
        "### Refusals",
        "",
        f"{entry['refusals']:,} refused (429/503/529); time_to_reject p50"
        f" {_ms(reject.get('p50'))} ms, p99 {_ms(reject.get('p99'))} ms;"
        f" {_share(entry['share'])} carried Retry-After.",
        "",
    ]


def write_summary_md(summary: Mapping[str, Any], path: Path) -> Path:
    return write_atomic(Path(path), render_summary_md(summary))
