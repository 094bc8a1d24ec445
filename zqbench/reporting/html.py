"""report.html: one self-contained page (inline CSS, images as base64 PNG, no script).

A renderer of the saved summary dict and the figures drawn from the samples: it computes
nothing new. Every string from the run passes through `redact` and `html.escape`.
Sections: verdict banner (each SLO's value, threshold, CI, verdict), run facts (scenario,
target, load, stages, environment), key metrics, status mix, figures.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import zqbench
from zqbench.errors import UsageError
from zqbench.metrics.slo import format_value, parse_slo
from zqbench.outputs.markdown import KEY_METRICS, VERDICT_BADGE
from zqbench.redact import redact

CSS = """
:root { --pass:#1a7f37; --fail:#cf222e; --inconclusive:#9a6700; --invalid:#6e40c9; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color:#1f2328; max-width:1080px; margin:0 auto; padding:16px 24px; }
h1 { font-size:20px; margin:8px 0 4px; } h2 { font-size:16px; margin:28px 0 8px;
  border-bottom:1px solid #d0d7de; padding-bottom:4px; }
.sub { color:#57606a; margin:0 0 12px; }
.banner { border-radius:8px; padding:12px 16px; margin:12px 0; color:#fff; }
.banner.pass { background:var(--pass); } .banner.fail { background:var(--fail); }
.banner.inconclusive { background:var(--inconclusive); }
.banner.invalid { background:var(--invalid); }
.banner .word { font-size:24px; font-weight:700; letter-spacing:.04em; }
.banner table { background:#fff; color:#1f2328; border-radius:6px; margin-top:10px; }
.banner ul { margin:6px 0 0 18px; padding:0; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid #eaeef2;
  vertical-align:top; }
th { background:#f6f8fa; } td.num, th.num { text-align:right;
  font-variant-numeric:tabular-nums; white-space:nowrap; }
.v-pass { color:var(--pass); font-weight:600; } .v-fail { color:var(--fail); font-weight:600; }
.v-inconclusive { color:var(--inconclusive); font-weight:600; }
.note { color:#57606a; font-size:12px; }
figure { margin:16px 0 24px; break-inside:avoid; page-break-inside:avoid; }
figure img { width:100%; height:auto; border:1px solid #eaeef2; }
figcaption { color:#57606a; font-size:12px; margin-top:4px; }
figcaption b { color:#1f2328; }
.grid { display:grid; grid-template-columns:1fr 1fr; gap:0 24px; }
@media (max-width: 800px) { .grid { grid-template-columns:1fr; } }
@media print { body { max-width:none; padding:0; font-size:11px; }
  .banner { -webkit-print-color-adjust:exact; print-color-adjust:exact; }
  h2 { break-after:avoid; } }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def number(value: Any) -> float | None:
    """A summary.json number: null -> None, "inf" -> inf."""
    if value is None:
        return None
    if isinstance(value, str):
        return float(value)
    return float(value)


def ms(value: Any) -> str:
    v = number(value)
    if v is None:
        return "–"
    if math.isinf(v):
        return "∞"
    return f"{v * 1e3:.4g}"


def slo_unit(expr: str) -> str:
    """The unit an SLO was written in (values are shown in it); '' if it no longer parses."""
    try:
        return parse_slo(expr).unit
    except UsageError:
        return ""


def slo_cells(slo: Mapping[str, Any]) -> dict[str, str]:
    """Value, threshold and CI of one SLO record, formatted in the SLO's own unit."""
    unit = slo_unit(slo["expr"])
    if slo["metric"] == "errors" or str(slo["metric"]).startswith("status_"):
        unit = "%"
    value = format_value(number(slo["value"]), unit)
    threshold = format_value(number(slo["threshold"]), unit)
    low, high = number(slo.get("ci_low")), number(slo.get("ci_high"))
    if low is None and high is None:
        ci = "–"
    else:
        lo = "−∞" if low is None else format_value(low, unit)
        hi = "+∞" if high is None else format_value(high, unit)
        ci = f"[{lo}, {hi}]"
    return {"value": value, "threshold": threshold, "ci": ci}


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int]) -> str:
    """Rows of already-escaped cells."""
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def banner(summary: Mapping[str, Any]) -> str:
    verdict = str(summary["verdict"])
    requests = summary["requests"]
    parts = [
        f'<section id="verdict" class="banner {esc(verdict)}" data-verdict="{esc(verdict)}">',
        f'<div class="word">{esc(verdict.upper())}</div>',
        f"<div>{requests['sent']:,} requests sent · {requests['ok']:,} ok ·"
        f" {requests['failed']:,} failed · {float(summary['duration']):.1f} s</div>",
    ]
    validity = summary["validity"]
    if not validity["ok"]:
        parts.append("<div><b>The run is invalid</b> (its numbers do not describe the target):")
        parts.append("<ul>" + "".join(f"<li>{esc(r)}</li>" for r in validity["reasons"]))
        parts.append("</ul></div>")
    if summary["slos"]:
        rows = []
        for slo in summary["slos"]:
            cells = slo_cells(slo)
            v = esc(slo["verdict"])
            rows.append(
                f'<tr data-expr="{esc(slo["expr"])}" data-verdict="{v}">'
                f"<td><code>{esc(slo['expr'])}</code></td>"
                f'<td class="num">{esc(cells["value"])}</td>'
                f'<td class="num">{esc(cells["threshold"])}</td>'
                f'<td class="num">{esc(cells["ci"])}</td>'
                f'<td class="v-{v}">{v}</td>'
                f'<td class="note">{esc(slo["message"])}</td></tr>'
            )
        head = "".join(
            f"<th{' class=num' if h in ('value', 'threshold', '95% CI') else ''}>{h}</th>"
            for h in ("SLO", "value", "threshold", "95% CI", "verdict", "detail")
        )
        parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>")
        parts.append("</table>")
    else:
        parts.append("<div>No SLOs were set: the verdict reflects validity only.</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        rows: list[tuple[str, str]] = []
        for k, v in value.items():
            rows += _flatten(f"{prefix}.{k}" if prefix else str(k), v)
        return rows
    return [(prefix, "–" if value is None else str(value))]


def facts(summary: Mapping[str, Any]) -> str:
    scenario = summary["scenario"]
    config = scenario.get("config", {})
    load = summary.get("load", {})
    throughput = summary.get("throughput", {})

    def rate(v: Any) -> str:
        return "–" if v is None else f"{float(v):.4g} req/s"

    rows = [
        ("scenario", scenario["name"]),
        ("description", config.get("description", "")),
        ("target", summary["target"]),
        ("api", summary["api"]),
        ("started", summary["started_at"]),
        ("duration", f"{float(summary['duration']):.2f} s"),
        ("loop", "open (arrival rate)" if load.get("open_loop") else "closed (virtual users)"),
        (
            "offered",
            f"{load.get('offered_requests') or '–'} requests, {rate(load.get('offered_rate'))}",
        ),
        (
            "achieved",
            f"{rate(load.get('achieved_rate'))} ({_ratio(load.get('achieved_ratio'))} of offered)",
        ),
        ("ok throughput", rate(throughput.get("requests_per_s"))),
        ("goodput", rate(throughput.get("goodput_per_s"))),
        (
            "server clock offset",
            f"{summary['clock'].get('server_offset_ns', 0)} ns"
            f" ({summary['clock'].get('server_offset_source', '')})",
        ),
    ]
    run_table = _table(("", ""), ((esc(k), esc(v)) for k, v in rows), set())
    stage_rows = [
        (
            esc(s["index"]),
            esc(s["name"]),
            f"{s['start']:.2f}",
            f"{s['end']:.2f}",
            esc(s.get("target_rate", "–")),
        )
        for s in summary.get("stages", [])
    ]
    stages = _table(("#", "stage", "start (s)", "end (s)", "target (req/s)"), stage_rows, {2, 3, 4})
    env = _table(
        ("", ""), ((esc(k), esc(v)) for k, v in _flatten("", summary.get("environment", {}))), set()
    )
    return (
        f'<div class="grid"><div><h2>Run</h2>{run_table}</div>'
        f"<div><h2>Stages</h2>{stages}<h2>Environment</h2>{env}</div></div>"
    )


def _ratio(v: Any) -> str:
    return "–" if v is None else f"{float(v):.1%}"


def metrics_table(summary: Mapping[str, Any]) -> str:
    rows, unavailable = [], []
    for name in KEY_METRICS:
        entry = summary["metrics"].get(name)
        if entry is None:
            continue
        if "unavailable" in entry:
            unavailable.append(f"<li><code>{esc(name)}</code>: {esc(entry['unavailable'])}</li>")
            continue
        ci = entry.get("ci", {})

        def with_ci(p: str, entry: Mapping[str, Any] = entry, ci: Mapping[str, Any] = ci) -> str:
            low, high = ci.get(p, [None, None])
            bounds = f"[{ms(low)}, {ms(high)}]" if p in ci else ""
            return f"{ms(entry.get(p))} <span class=note>{esc(bounds)}</span>"

        rows.append(
            (
                f"<code>{esc(name)}</code>",
                f"{entry['n']:,}",
                with_ci("p50"),
                ms(entry.get("p90")),
                with_ci("p99"),
                ms(entry.get("p999")),
                ms(entry.get("max")),
            )
        )
    table = _table(
        ("metric", "n", "p50 [95% CI]", "p90", "p99 [95% CI]", "p99.9", "max"),
        rows,
        {1, 2, 3, 4, 5, 6},
    )
    ratios = [
        f"<code>{esc(name)}</code> p99/p50 = {float(r['p99_p50']):.3g}"
        f" (worst class {esc(r['worst_class'])})"
        for name, r in summary.get("ratios", {}).items()
        if isinstance(r.get("p99_p50"), (int, float))
    ]
    out = f"<h2>Key metrics (ms)</h2>{table}"
    if ratios:
        out += f"<p>{' · '.join(ratios)}</p>"
    if unavailable:
        items = "".join(unavailable)
        out += f"<p class=note>Unavailable (no value, not zero):</p><ul class=note>{items}</ul>"
    return out


def status_table(summary: Mapping[str, Any]) -> str:
    total = max(1, summary["requests"]["sent"])
    rows = [
        (f"<code>{esc(k)}</code>", f"{n:,}", f"{n / total:.2%}")
        for k, n in summary["status_codes"].items()
    ]
    return f"<h2>Status mix</h2>{_table(('status', 'count', 'share'), rows, {1, 2})}"


def figure(title: str, caption: str, png: bytes, name: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure id="plot-{esc(name)}"><img alt="{esc(title)}" src="data:image/png;base64,{data}">'
        f"<figcaption><b>{esc(title)}.</b> {esc(caption)}</figcaption></figure>"
    )


def render_report_html(
    summary: Mapping[str, Any], figures: Sequence[tuple[str, str, str, bytes]]
) -> str:
    """The page; figures are (name, title, caption, png bytes)."""
    summary = redact(dict(summary))
    scenario = summary["scenario"]["name"]
    verdict = str(summary["verdict"])
    title = f"zqbench {VERDICT_BADGE.get(verdict, verdict)} · {scenario}"
    version = zqbench.__version__
    plots = "".join(figure(t, c, png, n) for n, t, c, png in figures)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>zqbench · {esc(scenario)}</h1>"
        f"<p class=sub>{esc(summary['target'])} · {esc(summary['api'])} · started"
        f" {esc(summary['started_at'])}</p>"
        f"{banner(summary)}{facts(summary)}{metrics_table(summary)}{status_table(summary)}"
        f"<h2>Figures</h2>{plots or '<p class=note>No figures.</p>'}"
        f"<p class=note>Rendered by zqbench {esc(version)} from summary.json and"
        " samples.parquet; re-render with <code>zqbench report RUN_DIR</code>.</p>"
        "</body></html>\n"
    )
