"""summary.json's `ttft_split`: each request's TTFT split at the response head, in
summary.md, report.html and the terminal (the section added through the registry)."""

from __future__ import annotations

import pytest

from tests.metrics.conftest import build_samples
from tests.metrics.test_summary import run_info
from zqbench.cli.live_view import section_lines
from zqbench.metrics.summarize import summarize
from zqbench.outputs.render import render_report_html, render_summary_md


def test_the_split_is_the_head_and_what_came_after_it() -> None:
    """Latencies 40..400 ms: the head at a quarter, the first token at half (the builder's
    shape), so each request's TTFT is half head, half after; known percentiles."""
    samples = build_samples([40.0 * k for k in range(1, 11)])
    split = summarize(samples, run=run_info(), slos=[]).ttft_split
    assert split is not None
    assert split.requests == 10
    assert split.head_p50 == pytest.approx(0.05)  # x_(5) of 10, 20, ... 100 ms
    assert split.head_p99 == pytest.approx(0.1)
    assert split.after_head_p50 == pytest.approx(0.05)
    assert split.after_head_share == pytest.approx(0.5)


def test_no_request_with_a_first_token_has_no_split() -> None:
    samples = build_samples([10.0] * 3, status=503, error="http_503", t_first_token=None)
    summary = summarize(samples, run=run_info(), slos=[])
    assert summary.ttft_split is None
    assert "ttft_split" not in summary.to_json()


def test_every_output_shows_it() -> None:
    summary = summarize(build_samples([40.0, 80.0]), run=run_info(), slos=[])
    md = render_summary_md(summary)
    assert "| until the head (`ttfb`) | 10 | 20 |" in md
    assert "50.0% of the TTFT of 2 requests came after the head." in md
    page = render_report_html(summary, [])
    assert '<td>head to first token</td><td class="num">10</td><td class="num">20</td>' in page
    assert section_lines(summary) == [
        "TTFT split: head p50 10 ms (p99 20), then first token p50 10 ms (p99 20);"
        " 50.0% of TTFT after the head"
    ]
