"""compare.md, compare.html and compare.json: renderers of a Comparison (compare.py
computes everything).

    dumps(c), render_compare_md(c), render_compare_page(c, folder)   # zqbench.outputs.registry

compare.md and compare.html are laid out by templates/compare.md.j2 and compare.html.j2
(their shared words in compare_words.j2) over the comparison, each run's row and each
difference's cells made here. Durations are shown in milliseconds, rates in percent; the
CI column is the 95% interval of the difference (candidate - baseline). Every string
passes through redact + escape. compare.json holds seconds and fractions, "inf" for
infinity, null for no value.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zqbench.metrics.sections.text import figure, request_counts
from zqbench.metrics.sig_digits import significant
from zqbench.outputs.json_out import redacted
from zqbench.outputs.paths import PLOTS_DIR
from zqbench.outputs.plots import compare_percentiles
from zqbench.outputs.templating import html_environment, markdown_environment
from zqbench.redact import redact
from zqbench.summary import Summary, json_number

if TYPE_CHECKING:
    from zqbench.saved.compare import Comparison, Diff


def _value(v: float | None, rate: bool, signed: bool = False) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return ("+∞" if v > 0 else "−∞") if signed else "∞"
    sign = "+" if signed and v > 0 else ""
    return f"{sign}{v * 100:.3g}%" if rate else f"{sign}{significant(v * 1e3)}"


def _cells(d: Diff) -> list[str]:
    """A difference's cells from its metric to what is allowed; each page adds its verdict."""
    rate = d.key.endswith(":rate")
    low = "−∞" if d.ci_low is None else _value(d.ci_low, rate, signed=True)
    high = "+∞" if d.ci_high is None else _value(d.ci_high, rate, signed=True)
    if d.ci_low is None and d.ci_high is None:
        ci = "–" if d.diff is None else "unbounded (too few samples)"
    else:
        ci = f"[{low}, {high}]"
    rel = d.relative
    return [
        d.key + (" (pp)" if rate else " (ms)"),
        _value(d.baseline, rate),
        _value(d.candidate, rate),
        _value(d.diff, rate, signed=True),
        "–" if rel is None else f"{rel:+.1%}",
        ci,
        "–" if d.allowed is None else "≤ " + _value(d.allowed, rate, signed=True),
    ]


def _run_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for label, run in zip(comparison.stats, comparison.runs, strict=True):
        s = redacted(run.summary)
        server = s.environment.get("reference_server") or {}
        scheduler = server.get("scheduler") if isinstance(server, dict) else None
        share, ratio = _queued_share(s), _latency_ratio(s)
        rows.append(
            [
                label,
                s.scenario.name,
                s.target,
                str(scheduler or "–"),
                s.verdict,
                f"{s.requests.sent:,}",
                request_counts(s),
                "–" if share is None else f"{share:.1%}",
                "–" if ratio is None else f"{ratio:.2f}",
                f"{s.duration:.1f}",
            ]
        )
    return rows


def _queued_share(s: Summary) -> float | None:
    """The admitted requests that waited in a queue: what sets a FIFO twin apart."""
    return None if s.outcomes is None else s.outcomes.admitted_queued_share


def _latency_ratio(s: Summary) -> float | None:
    """latency P99/P50 of the run's worst request class: a queue's tail apart from its
    middle, the burst's own SLO."""
    ratio = s.ratios.get("latency")
    value = None if ratio is None or ratio.p99_p50 is None else float(ratio.p99_p50)
    return value if value is not None and math.isfinite(value) else None


def render_compare_md(comparison: Comparison) -> str:
    template = markdown_environment().get_template("compare.md.j2")
    return template.render(comparison=comparison, runs=_run_rows(comparison), cells=_cells)


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
                "queued_share": json_number(_queued_share(r.summary)),
                "latency_p99_p50": _latency_ratio(r.summary),
            }
            for label, r in zip(comparison.stats, comparison.runs, strict=True)
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
    runs = [(label, stats.curves) for label, stats in comparison.stats.items()]
    metrics = list(runs[0][1])  # the curves every run has (saved/compare.py's FIGURE_METRICS)
    plot = compare_percentiles(runs, metrics, folder / PLOTS_DIR)
    template = html_environment().get_template("compare.html.j2")
    page = template.render(
        comparison=comparison,
        runs=_run_rows(comparison),
        cells=_cells,
        figures=[figure(plot.name, plot.title, plot.caption, plot.path.read_bytes())],
    )
    return page, [plot.path]
