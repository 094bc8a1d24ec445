"""A --distributed run's "Workers" table in summary.md and report.html, from summary.json's
`distributed` section: one worker done, one lost mid-run with its missing slice named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reporting.synth import write_synthetic_run
from zqbench.outputs.render import render_report_html, render_summary_md
from zqbench.summary import Distributed, DistributedWorker, Summary

MISSING = (
    "812 of its 1500 scheduled requests (intended t = 2.70 .. 10.00 s) never arrived;"
    " it was lost at t = 5.6 s (its heartbeats stopped)"
)


def _worker(index: int, **fields: object) -> DistributedWorker:
    base: dict[str, object] = {
        "index": index,
        "host": f"load-{index}",
        "node": f"node-{index}",
        "state": "done",
        "clock_offset_ns": 12_345,
        "clock_uncertainty_ns": 4_000,
        "clock_rtt_ns": 8_000,
        "requests_assigned": 1500,
        "requests_sent": 1500,
        "samples_received": 1500,
        "lost_requests": 0,
        "missing": None,
        "schedule_lag_p99_s": 0.000421,
    }
    return DistributedWorker.model_validate({**base, **fields})


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> Summary:
    plain = write_synthetic_run(tmp_path_factory.mktemp("dist") / "run", n=200)
    distributed = Distributed(
        master="0.0.0.0:5557",
        expected_workers=2,
        workers=[
            _worker(0),
            _worker(
                1,
                state="lost",
                # Another machine: its monotonic clock is days behind the master's.
                clock_offset_ns=-86_400_123_456_789,
                clock_uncertainty_ns=1_250_000,
                requests_sent=None,
                samples_received=688,
                lost_requests=812,
                missing=MISSING,
                schedule_lag_p99_s=None,
            ),
        ],
        lost_requests=812,
        lost_share=0.2707,
        max_lost_share=0.3,
    )
    return plain.model_copy(update={"distributed": distributed})


def test_summary_md_lists_each_worker(summary: Summary) -> None:
    lines = render_summary_md(summary).splitlines()
    start = lines.index("### Workers")
    assert lines[start + 2] == (
        "Master `0.0.0.0:5557`; lost with their workers: 812 requests (27.07% of the run;"
        " allowed 30.00%). Clock: the master's clock minus the worker's, ± its uncertainty."
    )
    assert lines[start + 4 : start + 8] == [
        "| worker | sent | recorded | clock offset | lag p99 (ms) | state | missing |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
        "| 0 (load-0) | 1,500 | 1,500 | +12.3 µs ± 4.0 µs | 0.421 | done |  |",
        f"| 1 (load-1) | – | 688 | -86400.123457 s ± 1.250 ms | – | lost | {MISSING} |",
    ]


def test_report_html_lists_each_worker(summary: Summary) -> None:
    page = render_report_html(summary, [])
    assert '<section id="workers">' in page
    assert (
        '<tr><td>0 (load-0)</td><td class="num">1,500</td><td class="num">1,500</td>'
        '<td class="num">+12.3 µs ± 4.0 µs</td><td class="num">0.421</td><td>done</td>'
        "<td></td></tr>"
    ) in page
    assert (
        '<tr><td>1 (load-1)</td><td class="num">–</td><td class="num">688</td>'
        '<td class="num">-86400.123457 s ± 1.250 ms</td><td class="num">–</td><td>lost</td>'
        f"<td>{MISSING}</td></tr>"
    ) in page


def test_a_local_run_has_no_workers_table(tmp_path: Path) -> None:
    plain = write_synthetic_run(tmp_path / "run", n=200)
    assert "### Workers" not in render_summary_md(plain)
    assert 'id="workers"' not in render_report_html(plain, [])
