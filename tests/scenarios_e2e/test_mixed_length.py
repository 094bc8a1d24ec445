"""The bundled `mixed-length` scenario: calibrated prompts, clamping, head-of-line ratios.

Scaled down (12 req/s: 3 s short-only, then 6 s of the mix) against 4 sim slots with a
16K context, so the 128K class is clamped to ~16K tokens: its 160 ms prefill stalls the
engine's decode steps, which both schedulers share. What differs is admission: fifo
queues (server_queue grows to a step or more), zero-queue refuses at arrival instead.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.scenarios_e2e.conftest import run_bundled

pytestmark = pytest.mark.slow  # two bundled-scenario runs of ~10 s each

SCALE = {"rate_scale": 3.0, "duration_scale": 0.1, "warm_connections": 128}
CONTEXT = ("--max-context", "16384")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("mixed")
    return {
        scheduler: run_bundled(
            "mixed-length", out / scheduler, scheduler=scheduler, server_args=CONTEXT, **SCALE
        )
        for scheduler in ("zero-queue", "fifo")
    }


def test_prompts_land_within_2_percent_of_their_token_targets(runs: dict[str, Any]) -> None:
    """Calibrated prompt sizes, checked against the server's own usage counts; the long
    class is clamped to 98% of the room max_tokens leaves in the 16K context."""
    result = runs["zero-queue"]
    prompts = result.summary.environment["prompts"]
    assert prompts["max_context"] == 16384
    assert prompts["clamped"] == [
        "class long: prompt_tokens 131072 + max_tokens 64 > max context 16384; "
        "clamped to 15993 prompt tokens"
    ]
    assert prompts["calibration"]["source"] == "count_tokens"
    targets = {"long": 15993, "medium": 4096, "short": 256}
    samples = pq.read_table(result.out_dir / "samples.parquet").to_pandas()
    ok = samples[samples["status"] == 200]
    assert ok["tokens_from_usage"].all()
    for cls, target in targets.items():
        tokens = ok.loc[ok["request_class"] == cls, "prompt_tokens"]
        assert len(tokens) > 0
        assert (abs(tokens - target) <= 0.02 * target).all(), (cls, tokens.describe())


def test_head_of_line_ratio_shows_the_long_prefills(runs: dict[str, Any]) -> None:
    """The stage mix holds: stage 0 sends only short prompts. In stage 1 the long
    prefills stretch the short class's tail in the engine both schedulers share."""
    for result in runs.values():
        s = result.summary
        assert list(s.metrics["latency"].by_class) == ["long", "medium", "short"]
        samples = pq.read_table(result.out_dir / "samples.parquet").to_pandas()
        assert set(samples.loc[samples["stage"] == 0, "request_class"]) == {"short"}
        hol = s.head_of_line
        assert (hol.baseline_stage, hol.mixed_stage, hol.classes) == (0, 1, ["short"])
        assert hol.by_class["short"].latency.ratio_p99 > 1.5
        assert "### Head-of-line blocking" in (result.out_dir / "summary.md").read_text()


def test_fifo_queues_where_zero_queue_refuses(runs: dict[str, Any]) -> None:
    zq, fifo = runs["zero-queue"].summary, runs["fifo"].summary
    assert set(fifo.status_codes) == {"200"}
    assert set(zq.status_codes) <= {"200", "529"}
    assert zq.metrics["server_queue"].p99 < 0.005
    assert fifo.metrics["server_queue"].p99 > 0.05
    assert fifo.metrics["server_queue"].p99 > 20 * zq.metrics["server_queue"].p99
