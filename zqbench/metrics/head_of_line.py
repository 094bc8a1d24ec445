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

from zqbench.metrics import quantiles
from zqbench.metrics.frame import MetricFrame
from zqbench.summary import HeadOfLine, HeadOfLineClass, HeadOfLineRow, HeadOfLineWorst, Unavailable


def _pick(
    frame: MetricFrame, stage_classes: Sequence[tuple[str, ...] | None]
) -> tuple[int, int] | None:
    all_classes = set(frame.classes)
    sent = {int(s) for s in frame.stages}
    for b, base in enumerate(stage_classes):
        if base is None or b not in sent:
            continue
        for m in range(b + 1, len(stage_classes)):
            mixed = stage_classes[m]  # None: every class
            if m in sent and set(base) < (all_classes | set(base) if mixed is None else set(mixed)):
                return b, m
        return None
    return None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def _row(frame: MetricFrame, metric: str, cls: str, b: int, m: int) -> HeadOfLineRow:
    """One class's `metric` in the baseline stage `b` and the mixed stage `m`."""
    base = frame.sorted_seconds(metric, frame.mask(stage=b, request_class=cls))
    mixed = frame.sorted_seconds(metric, frame.mask(stage=m, request_class=cls))
    base_p50, mixed_p50 = quantiles.quantile(base, 0.5), quantiles.quantile(mixed, 0.5)
    base_p99, mixed_p99 = quantiles.quantile(base, 0.99), quantiles.quantile(mixed, 0.99)
    return HeadOfLineRow(
        n_baseline=len(base),
        n_mixed=len(mixed),
        baseline_p50=base_p50,
        mixed_p50=mixed_p50,
        ratio_p50=_ratio(mixed_p50, base_p50),
        baseline_p99=base_p99,
        mixed_p99=mixed_p99,
        ratio_p99=_ratio(mixed_p99, base_p99),
    )


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def head_of_line(
    frame: MetricFrame, stage_classes: Sequence[tuple[str, ...] | None]
) -> HeadOfLine | Unavailable:
    """Per baseline class, latency and ttft quantiles of both stages and their ratios."""
    picked = _pick(frame, stage_classes)
    if picked is None:
        return Unavailable(
            unavailable="no baseline stage with a restricted mix followed by a stage "
            "that adds classes (see docs/scenarios.md, per-stage mix)"
        )
    b, m = picked
    base_classes = stage_classes[b] or ()
    by_class = {
        cls: HeadOfLineClass(
            latency=_row(frame, "latency", cls, b, m), ttft=_row(frame, "ttft", cls, b, m)
        )
        for cls in base_classes
    }
    rows = by_class.values()
    return HeadOfLine(
        baseline_stage=b,
        mixed_stage=m,
        classes=list(base_classes),
        by_class=by_class,
        # The worst class per ratio: the headline numbers.
        worst=HeadOfLineWorst(
            latency_p50_ratio=_worst([r.latency.ratio_p50 for r in rows]),
            latency_p99_ratio=_worst([r.latency.ratio_p99 for r in rows]),
            ttft_p50_ratio=_worst([r.ttft.ratio_p50 for r in rows]),
            ttft_p99_ratio=_worst([r.ttft.ratio_p99 for r in rows]),
        ),
    )
