"""head_of_line: short-class latency/ttft in the mixed stage over the short-only baseline."""

from __future__ import annotations

import numpy as np

from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import summarize
from zqbench.summary import Unavailable

from .conftest import build_samples
from .test_summary import run_info


def mixed_run(stage_classes):
    # Stage 0: 100 short requests, latency 1..100 ms. Stage 1: 100 short with latency
    # 3..300 ms (3x) and 20 long ones at 1 s. ttft = latency / 2 (the builder's rule).
    short0 = np.arange(1.0, 101.0)
    short1 = 3 * np.arange(1.0, 101.0)
    latency = [*short0, *short1, *([1000.0] * 20)]
    samples = build_samples(
        latency,
        stage=[0] * 100 + [1] * 120,
        request_class=["short"] * 200 + ["long"] * 20,
    )
    stages = [StageInfo("base", 0.0, 1.0, None, stage_classes[0])]
    stages.append(StageInfo("mixed", 1.0, 2.2, None, stage_classes[1]))
    return summarize(samples, run=run_info(duration_s=2.2, stages=stages), slos=[])


def test_ratio_of_the_short_class_between_stages() -> None:
    hol = mixed_run([("short",), None]).head_of_line
    assert (hol.baseline_stage, hol.mixed_stage, hol.classes) == (0, 1, ["short"])
    lat = hol.by_class["short"].latency
    assert (lat.n_baseline, lat.n_mixed) == (100, 100)
    assert np.isclose(lat.baseline_p50, 0.050) and np.isclose(lat.mixed_p50, 0.150)
    assert np.isclose(lat.baseline_p99, 0.099) and np.isclose(lat.mixed_p99, 0.297)
    assert np.isclose(lat.ratio_p50, 3.0) and np.isclose(lat.ratio_p99, 3.0)
    assert np.isclose(hol.by_class["short"].ttft.ratio_p99, 3.0)
    assert np.isclose(hol.worst.latency_p99_ratio, 3.0)


def test_mixed_stage_must_add_classes() -> None:
    """Two stages with the same restricted mix are no comparison."""
    hol = mixed_run([("short",), ("short",)]).head_of_line
    assert isinstance(hol, Unavailable)
    assert isinstance(mixed_run([None, None]).head_of_line, Unavailable)


def test_summary_md_renders_the_ratios() -> None:
    from zqbench.outputs.render import render_summary_md

    text = render_summary_md(mixed_run([("short",), ("short", "long")]))
    assert "### Head-of-line blocking: stage 1 (mixed) vs stage 0 (baseline)" in text
    assert "| short | `latency` | 50 ms | 150 ms | 3 | 99 ms | 297 ms | 3 |" in text
