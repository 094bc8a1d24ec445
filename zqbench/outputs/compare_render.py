"""compare.md, compare.html and compare.json: renderers of a Comparison (compare.py
computes everything).

    dumps(c), render_compare_md(c), render_compare_page(c, folder)   # zqbench.outputs.registry

Durations are shown in milliseconds, rates in percent; the CI column is the 95% interval
of the difference (candidate - baseline). Every string passes through redact + escape.
compare.json holds seconds and fractions, "inf" for infinity, null for no value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import escape as esc

from zqbench.metrics.sections.text import request_counts
from zqbench.metrics.sig_digits import significant
from zqbench.outputs.html import CSS, figure
from zqbench.outputs.json_out import redacted
from zqbench.outputs.paths import PLOTS_DIR
from zqbench.outputs.plots import Plot, compare_percentiles
from zqbench.outputs.templating import code, markdown_text, table_cell
from zqbench.redact import redact
from zqbench.summary import Summary, json_number

if TYPE_CHECKING:
    from zqbench.saved.compare import Comparison, Diff

COMPARE_PLOT_METRICS = ("latency", "latency_corrected", "ttft")

VERDICT_BADGE = {
    "ok": "✅ NO REGRESSION",
    "regression": "❌ REGRESSION",
    "inconclusive": "⚠️ INCONCLUSIVE",
    "invalid": "🚫 INVALID RUN",
}
DIFF_BADGE = {
    "ok": "ok",
    "regression": "**regression**",
    "inconclusive": "inconclusive",
    "unavailable": "n/a",
}
BANNER_CLASS = {
    "ok": "pass",
    "regression": "fail",
    "inconclusive": "inconclusive",
    "invalid": "invalid",
}


def _value(v: float | None, rate: bool, signed: bool = False) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return ("+∞" if v > 0 else "−∞") if signed else "∞"
    sign = "+" if signed and v > 0 else ""
    return f"{sign}{v * 100:.3g}%" if rate else f"{sign}{significant(v * 1e3)}"


def _cells(d: Diff) -> dict[str, str]:
    rate = d.key.endswith(":rate")
    low = "−∞" if d.ci_low is None else _value(d.ci_low, rate, signed=True)
    high = "+∞" if d.ci_high is None else _value(d.ci_high, rate, signed=True)
    if d.ci_low is None and d.ci_high is None:
        ci = "–" if d.diff is None else "unbounded (too few samples)"
    else:
        ci = f"[{low}, {high}]"
    rel = d.relative
    return {
        "key": d.key + (" (pp)" if rate else " (ms)"),
        "baseline": _value(d.baseline, rate),
        "candidate": _value(d.candidate, rate),
        "diff": _value(d.diff, rate, signed=True),
        "relative": "–" if rel is None else f"{rel:+.1%}",
        "ci": ci,
        "allowed": "–" if d.allowed is None else "≤ " + _value(d.allowed, rate, signed=True),
        "verdict": d.verdict + ("" if d.gated else " (not gated)"),
    }


def _run_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for label, run in zip(comparison.frames, comparison.runs, strict=True):
        s = redacted(run.summary)
        server = s.environment.get("reference_server") or {}
        scheduler = server.get("scheduler") if isinstance(server, dict) else None
        r = s.requests
        rows.append(
            [
                label,
                s.scenario.name,
                s.target,
                str(scheduler or "–"),
                s.verdict,
                f"{r.sent:,}",
                request_counts(s),
                _queued_share(s),
                _tail_ratio(s),
                f"{s.duration:.1f}",
            ]
        )
    return rows


def _queued_share(s: Summary) -> str:
    """The admitted requests that waited in a queue: what sets a FIFO twin apart."""
    share = None if s.outcomes is None else s.outcomes.admitted_queued_share
    return "–" if share is None else f"{share:.1%}"


def _tail_ratio(s: Summary) -> str:
    """latency P99/P50 of the run's worst request class: a queue's tail apart from its
    middle, the burst's own SLO."""
    value = _latency_ratio(s)
    return "–" if value is None else f"{value:.2f}"


def _latency_ratio(s: Summary) -> float | None:
    ratio = s.ratios.get("latency")
    value = None if ratio is None or ratio.p99_p50 is None else float(ratio.p99_p50)
    return value if value is not None and math.isfinite(value) else None


RUN_HEADERS = (
    "run",
    "scenario",
    "target",
    "server scheduler",
    "run verdict",
    "sent",
    "what became of them",  # the headline's words: fast refusals are not failures
    "queued (of admitted)",
    "latency P99/P50",
    "duration (s)",
)
DIFF_HEADERS = ("metric", "baseline", "candidate", "Δ", "Δ %", "95% CI of Δ", "allowed", "verdict")
_DIFF_FIELDS = ("key", "baseline", "candidate", "diff", "relative", "ci", "allowed", "verdict")


def _md_cell(text: Any) -> str:
    """A table cell shown as written: no pipe ends it, no `<` opens an HTML tag."""
    return markdown_text(table_cell(text))


def render_compare_md(comparison: Comparison) -> str:
    lines = [
        f"## zqbench compare: {VERDICT_BADGE[comparison.verdict]}",
        "",
        f"Baseline {code(table_cell(comparison.pairs[0].baseline))}; regression = the 95% CI of the"
        f" difference lies above {comparison.max_regression:.1%} of the baseline"
        f" (error rate: above +{comparison.max_error_increase:.1%} points)."
        f" Gated: {', '.join(code(g) for g in comparison.gated)}.",
        "",
        *(f"> warning: {table_cell(w)}\n" for w in comparison.warnings),
        "| " + " | ".join(RUN_HEADERS) + " |",
        "| " + " | ".join("---" for _ in RUN_HEADERS) + " |",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in _run_rows(comparison)]
    for pair in comparison.pairs:
        lines += [
            "",
            f"### {code(table_cell(pair.candidate))} vs {code(table_cell(pair.baseline))}:"
            f" {VERDICT_BADGE[pair.verdict]}",
            "",
            "| " + " | ".join(DIFF_HEADERS) + " |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for d in pair.diffs:
            cells = _cells(d)
            cells["verdict"] = DIFF_BADGE[d.verdict] + ("" if d.gated else " (not gated)")
            lines.append("| " + " | ".join(_md_cell(cells[f]) for f in _DIFF_FIELDS) + " |")
    return "\n".join(lines) + "\n"


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], attrs: Sequence[str]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        f"<tr{attr}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
        for row, attr in zip(rows, attrs, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_compare_html(comparison: Comparison, plots: Sequence[Plot]) -> str:
    verdict = comparison.verdict
    runs = _run_rows(comparison)
    parts = [
        f'<section id="verdict" class="banner {BANNER_CLASS[verdict]}"'
        f' data-verdict="{esc(verdict)}">',
        f'<div class="word">{esc(VERDICT_BADGE[verdict])}</div>',
        f"<div>Baseline {esc(comparison.pairs[0].baseline)}; tolerance"
        f" {comparison.max_regression:.1%} of the baseline per percentile,"
        f" +{comparison.max_error_increase:.1%} points of error rate. Gated:"
        f" {esc(', '.join(comparison.gated))}.</div></section>",
        *(f"<p class=note>warning: {esc(w)}</p>" for w in comparison.warnings),
        "<h2>Runs</h2>",
        _html_table(RUN_HEADERS, runs, [""] * len(runs)),
    ]
    for pair in comparison.pairs:
        rows = [[_cells(d)[f] for f in _DIFF_FIELDS] for d in pair.diffs]
        attrs = [f' data-key="{esc(d.key)}" data-verdict="{esc(d.verdict)}"' for d in pair.diffs]
        parts += [
            f"<h2>{esc(pair.candidate)} vs {esc(pair.baseline)}: {esc(VERDICT_BADGE[pair.verdict])}"
            "</h2>",
            _html_table(DIFF_HEADERS, rows, attrs),
            "<p class=note>Δ = candidate − baseline (ms; error rate in percentage points)."
            " The CI combines each run's 97.5% order-statistic interval (Bonferroni), so it"
            " covers the true difference with at least 95% probability.</p>",
        ]
    parts.append("<h2>Figures</h2>")
    parts += [figure(p.title, p.caption, p.path.read_bytes(), p.name) for p in plots]
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>zqbench compare · {esc(VERDICT_BADGE[verdict])}</title><style>{CSS}</style>"
        "</head><body><h1>zqbench compare</h1>" + "".join(parts) + "</body></html>\n"
    )


def to_dict(comparison: Comparison) -> dict[str, Any]:
    """compare.json: machine-readable, seconds and fractions, no inf/NaN."""

    def clean(d: Diff) -> dict[str, Any]:
        out = asdict(d)
        # "stat", not "key": the redactor hides the value of any field named like a
        # credential ("key"), and every statistic's name read "<redacted>".
        out = {"stat": out.pop("key"), **out}
        for k in ("baseline", "candidate", "diff", "ci_low", "ci_high", "allowed"):
            out[k] = json_number(out[k])
        out["relative"] = json_number(d.relative)
        return out

    return {
        "schema": "zqbench.compare/1",
        "verdict": comparison.verdict,
        "max_regression": comparison.max_regression,
        "max_error_increase": comparison.max_error_increase,
        "gated": comparison.gated,
        **({"warnings": comparison.warnings} if comparison.warnings else {}),
        "runs": [
            {
                "label": label,
                "path": str(r.path),
                "verdict": r.summary.verdict,
                "queued_share": json_number(
                    None if r.summary.outcomes is None else r.summary.outcomes.admitted_queued_share
                ),
                "latency_p99_p50": _latency_ratio(r.summary),
            }
            for label, r in zip(comparison.frames, comparison.runs, strict=True)
        ],
        "pairs": [
            {
                "baseline": p.baseline,
                "candidate": p.candidate,
                "verdict": p.verdict,
                "diffs": [clean(d) for d in p.diffs],
            }
            for p in comparison.pairs
        ],
    }


def dumps(comparison: Comparison) -> str:
    """compare.json's text, redacted."""
    return json.dumps(redact(to_dict(comparison)), indent=2, allow_nan=False) + "\n"


def render_compare_page(comparison: Comparison, folder: Path) -> tuple[str, list[Path]]:
    """compare.html's text, and its figure, plots/compare_percentiles.png, written into
    `folder` for the page to embed."""
    plot = compare_percentiles(
        list(comparison.frames.items()), COMPARE_PLOT_METRICS, folder / PLOTS_DIR
    )
    return render_compare_html(comparison, [plot]), [plot.path]
