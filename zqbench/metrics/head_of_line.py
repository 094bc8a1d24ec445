"""Head-of-line blocking made visible: short requests with and without long ones around.

A scenario measures it with two stages (docs/scenarios.md, "Per-stage mix"): a baseline
stage that draws only some classes (`mix = ["short"]`) and a later stage that adds others
(the long prompts). For each class of the baseline, the ratio

    ratio = metric quantile in the mixed stage / the same quantile in the baseline stage

for latency and ttft at p50 and p99. A server that lets a long prefill hold up short
requests (one queue, or one batch that the long prompt stretches) shows ratios well
above 1; a server that keeps them apart stays near 1.

Baseline: the first stage with a restricted mix that sent requests. Mixed: the first
later stage whose classes strictly include the baseline's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zqbench.metrics import quantiles
from zqbench.metrics.frame import MetricFrame

METRICS = ("latency", "ttft")


def _includes(outer: tuple[str, ...] | None, inner: tuple[str, ...], classes: set[str]) -> bool:
    outer_set = classes if outer is None else set(outer)
    return set(inner) < outer_set


def _pick(
    frame: MetricFrame, stage_classes: Sequence[tuple[str, ...] | None]
) -> tuple[int, int] | None:
    all_classes = set(frame.classes)
    sent = {int(s) for s in frame.stages}
    for b, base in enumerate(stage_classes):
        if base is None or b not in sent:
            continue
        for m in range(b + 1, len(stage_classes)):
            if m in sent and _includes(stage_classes[m], base, all_classes | set(base)):
                return b, m
        return None
    return None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def head_of_line(
    frame: MetricFrame, stage_classes: Sequence[tuple[str, ...] | None]
) -> dict[str, Any]:
    """`{"baseline_stage", "mixed_stage", "by_class": {cls: {metric: {...}}}, "worst"}`."""
    picked = _pick(frame, stage_classes)
    if picked is None:
        return {
            "unavailable": "no baseline stage with a restricted mix followed by a stage "
            "that adds classes (see docs/scenarios.md, per-stage mix)"
        }
    b, m = picked
    base_classes = stage_classes[b] or ()
    by_class: dict[str, Any] = {}
    ratios: dict[str, list[float]] = {f"{x}_{y}_ratio": [] for x in METRICS for y in ("p50", "p99")}
    for cls in base_classes:
        entry: dict[str, Any] = {}
        for metric in METRICS:
            base = frame.sorted_seconds(metric, frame.mask(stage=b, request_class=cls))
            mixed = frame.sorted_seconds(metric, frame.mask(stage=m, request_class=cls))
            row: dict[str, Any] = {"n_baseline": len(base), "n_mixed": len(mixed)}
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                bq = quantiles.quantile(base, q) if len(base) else None
                mq = quantiles.quantile(mixed, q) if len(mixed) else None
                row[f"baseline_{name}"] = bq
                row[f"mixed_{name}"] = mq
                row[f"ratio_{name}"] = _ratio(mq, bq)
                if row[f"ratio_{name}"] is not None:
                    ratios[f"{metric}_{name}_ratio"].append(row[f"ratio_{name}"])
            entry[metric] = row
        by_class[cls] = entry
    return {
        "baseline_stage": b,
        "mixed_stage": m,
        "classes": list(base_classes),
        "by_class": by_class,
        # The worst class per ratio: the headline numbers.
        "worst": {key: max(values) if values else None for key, values in ratios.items()},
    }
