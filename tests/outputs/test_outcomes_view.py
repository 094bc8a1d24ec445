"""The outcomes in summary.md, report.html (a table and the plot) and the terminal line."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from tests.metrics.conftest import MS, build_samples
from tests.metrics.test_outcomes import basis
from tests.metrics.test_summary import run_info
from zqbench.load.spans import StageInfo
from zqbench.metrics.sections.outcomes import ALWAYS_SHOWN, outcome_line
from zqbench.metrics.summarize import summarize
from zqbench.outputs.plots import OUTCOME_COLORS
from zqbench.outputs.render import render_html, render_summary_md
from zqbench.summary import Capacity, Unavailable

from .test_templates import EXAMPLE_RUNS, EXAMPLES, example

STAGES = [StageInfo("base", 0.0, 0.5, None, None), StageInfo("pulse", 0.5, 1.0, None, None)]


def _samples():
    # Stage 0: 50 served; stage 1: 30 queued (TTFT 400 ms against T = 70 ms), 20 refused in
    # 5 ms (fast), of which the last 5 cut by the run's end (interrupted, not refused).
    ttft = np.array([12.0] * 50 + [400.0] * 30 + [12.0] * 20)
    t_send = (np.arange(100) * 10 * MS).astype(np.int64)
    latency = np.where(np.arange(100) < 80, ttft + 100.0, 5.0)
    error = [None] * 80 + ["http_529"] * 15 + ["interrupted"] * 5
    return build_samples(
        list(latency),
        stage=[0] * 50 + [1] * 50,
        t_first_token=t_send + (ttft * MS).astype(np.int64),
        status=[200] * 80 + [529] * 15 + [0] * 5,
        error=error,
    )


def _summary(samples, **run):
    return summarize(samples, run=run_info(duration_s=1.0, stages=STAGES, **run), slos=[])


@pytest.fixture(scope="module")
def judged():
    summary = _summary(_samples(), outcome_basis=basis())
    assert summary.outcomes is not None
    return summary


def _table(text: str) -> dict[str, list[str]]:
    """The Outcomes table of summary.md: header and rows, by their first cell."""
    section = text.split("### Outcomes", 1)[1].split("\n\n")[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()]
    return {r[0]: r[1:] for r in rows if not r[0].startswith("---")}


def test_summary_md_shows_each_stages_outcomes_and_their_basis(judged) -> None:
    text = render_summary_md(judged)
    header = "| stage | served | queued | refused_fast | refused_slow | interrupted |"
    assert header + " queued of admitted | slow of refusals |" in text
    assert "| stage 0 (base) | 50 | 0 | 0 | 0 | 0 | 0.0% | – |" in text
    assert "| stage 1 (pulse) | 0 | 30 | 15 | 0 | 5 | 100.0% | 0.0% |" in text
    assert "| all | 50 | 30 | 15 | 0 | 5 | 37.5% | 0.0% |" in text
    assert "decided by ttft 80, time_to_reject 15, status 5;" in text
    assert "queued past server_queue 5 ms (timing headers)" in text
    assert "else past 2x TTFT at rest + max(margin 20 ms, hold 100 ms / 2)" in text
    assert "TTFT at rest 10 ms + 0 ms per 1k prompt tokens (spread 0 ms, 3 probes)." in text
    assert "`plots/outcomes.png` (in report.html)" in text


def test_the_markdown_numbers_are_the_summarys(judged) -> None:
    o = judged.outcomes
    table = _table(render_summary_md(judged))
    columns = table.pop("stage")[:-2]
    assert columns == [k for k, v in o.counts.items() if v or k in ALWAYS_SHOWN]
    stages = {str(s.index): s.name for s in judged.stages}
    expected = {f"stage {k} ({stages[k]})": v for k, v in o.by_stage.items()}
    expected["all"] = o
    assert set(table) == set(expected)
    for label, entry in expected.items():
        row = table[label]
        assert [int(n.replace(",", "")) for n in row[:-2]] == [entry.counts[c] for c in columns]
        shares = (entry.admitted_queued_share, entry.refusals_slow_share)
        assert row[-2:] == ["–" if v is None else f"{v:.1%}" for v in shares]


def test_an_unavailable_baseline_is_said_so() -> None:
    summary = _summary(_samples(), outcome_basis=basis(Unavailable(unavailable="HTTP 503")))
    text = render_summary_md(summary)
    assert "no TTFT at rest: HTTP 503." in text
    assert "decided by time_to_reject 15, status 5, none 80" in text
    assert "| all | 0 | 0 | 15 | 0 | 5 | 80 |" in text  # undetermined shows once seen


def test_report_html_has_the_table_and_a_plot_that_opens(judged, tmp_path: Path) -> None:
    samples = _samples()
    written = render_html(tmp_path, judged, samples)
    png = tmp_path / "plots" / "outcomes.png"
    assert png in written
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 100 and image.shape[1] > 300
    html = (tmp_path / "report.html").read_text()
    section = html.split('<section id="outcomes">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Outcomes</h2>" in section
    assert '<figure id="plot-outcomes">' in section  # in its section, not among the figures
    assert html.count('<figure id="plot-outcomes">') == 1
    assert re.search(r"<tr><td>all</td><td class=\"num\">50</td><td class=\"num\">30</td>", html)
    assert "37.5%" in section and "decided by ttft 80, time_to_reject 15, status 5" in section


def test_the_plot_colours_each_outcome_alike_whichever_a_run_has(judged) -> None:
    assert set(OUTCOME_COLORS) == set(judged.outcomes.counts)
    assert len(set(OUTCOME_COLORS.values())) == len(OUTCOME_COLORS)


def test_the_terminal_line_counts_and_shares(judged) -> None:
    assert outcome_line(judged.outcomes) == [
        "outcomes: served 50, queued 30 (37.5% of admitted), refused fast 15, slow 0"
        " (0.0% of refusals), interrupted 5"
    ]


def test_a_run_without_outcomes_shows_none(tmp_path: Path) -> None:
    samples = _samples()
    summary = _summary(samples)
    assert summary.outcomes is None
    assert "Outcomes" not in render_summary_md(summary)
    written = render_html(tmp_path, summary, samples)
    assert tmp_path / "plots" / "outcomes.png" not in written
    assert "Outcomes" not in (tmp_path / "report.html").read_text()
    assert outcome_line(summary.outcomes) == []


@pytest.mark.parametrize("run", EXAMPLE_RUNS)
def test_every_example_judges_its_outcomes_and_shows_them(run: str) -> None:
    summary = example(run)
    assert summary.outcomes is not None
    assert "### Outcomes" in render_summary_md(summary)
    assert "Outcomes" in (EXAMPLES / run / "report.html").read_text()


def test_the_burst_examples_show_the_queue_where_fifo_has_one() -> None:
    """The burst on the reference server: zero-queue admits at once and refuses fast, its
    FIFO twin queues most of the pulse's admitted requests (reports/examples)."""
    zq, fifo = example("burst-zero-queue").outcomes, example("burst-fifo").outcomes
    assert zq is not None and fifo is not None
    assert zq.counts["queued"] <= 0.01 * (zq.counts["served"] + zq.counts["queued"])
    assert zq.counts["refused_slow"] == 0 and zq.counts["refused_fast"] > 0
    pulse = fifo.by_stage["1"]
    assert pulse.admitted_queued_share is not None and pulse.admitted_queued_share > 0.5
    assert not isinstance(fifo.over_time, Unavailable) and sum(fifo.over_time.counts["queued"])


def test_the_saturation_examples_stop_fifo_and_run_zero_queue_to_its_end() -> None:
    fifo, zq = example("saturation-fifo"), example("saturation-zero-queue")
    assert fifo.stop is not None and fifo.stop.ended_run and fifo.stop.events
    assert fifo.verdict == "fail" and fifo.duration < 30  # of a 60 s ramp
    assert zq.stop is not None and zq.stop.events == [] and zq.verdict == "pass"
    assert "stopped by " in render_summary_md(fifo)


def test_false_refusals_are_said_with_their_capacity_stages_and_first_times() -> None:
    # Capacity 100 stated: the 15 refusals came with at most 30 admitted in flight.
    stated = Capacity(value=100, source="stated", detail="/health `slots`")
    summary = _summary(_samples(), outcome_basis=basis().model_copy(update={"capacity": stated}))
    text = render_summary_md(summary)
    assert (
        "False refusals (made while a slot was free): 15 of 15 refusals (100.0%), 15.0% of "
        "requests; capacity 100 (stated by /health `slots`); stage 0 (base) 0 of 0, stage 1 "
        "(pulse) 15 of 15; the first at 0.80 s, 0.81 s, 0.82 s, 0.83 s, 0.84 s ... (all "
        "listed: `outcomes.false_refusals.t`)."
    ) in text
    assert outcome_line(summary.outcomes)[0].endswith(
        ", interrupted 5, false refusals 15 (100.0% of refusals)"
    )


def test_a_refusal_in_disguise_is_named_as_one_on_every_output(tmp_path: Path) -> None:
    """12 served, 6 refused by a 503 and 7 by a 200 whose stream carried the overload error
    (refused_in_stream): the table's column, the status mix, the Refusals line, the headline
    and the terminal each say it was a refusal in disguise, with its count."""
    n = 25
    t_send = (np.arange(n) * 10 * MS).astype(np.int64)
    status = [200] * 12 + [503] * 6 + [200] * 7
    error = [None] * 12 + ["http_503"] * 6 + ["refused_in_stream"] * 7
    samples = build_samples(
        [112.0] * 12 + [3.0] * 13,
        t_first_token=[int(t + 12 * MS) for t in t_send[:12]] + [None] * 13,
        status=status,
        error=error,
    )
    summary = summarize(samples, run=run_info(duration_s=1.0, outcome_basis=basis()), slos=[])
    out = summary.outcomes
    assert out is not None and out.counts["refused_in_stream"] == 7
    phrase = "a refusal in disguise: 2xx, overload error inside"
    (line,) = outcome_line(out)
    assert line.startswith(
        "outcomes: served 12, queued 0 (0.0% of admitted), refused fast 6, slow 0"
        f" (0.0% of refusals), refused in stream 7 (each {phrase}), false refusals "
    )
    md = render_summary_md(summary)
    table = _table(md)
    assert table["stage"][:5] == [*ALWAYS_SHOWN, "refused_in_stream"]
    assert table["all"][:5] == ["12", "0", "6", "0", "7"]
    assert f"refused_in_stream 7: each {phrase} (the status mix's" in md
    assert f"| `200:refused_in_stream` ({phrase}) | 7 | 28.00% |" in md
    assert "13 refused (429/503/529; 7 of them in disguise as 2xx); time_to_reject" in md
    assert "refused 13 (6 fast, 7 in disguise as 2xx), failed 0" in md
    render_html(tmp_path, summary, samples)
    html = (tmp_path / "report.html").read_text()
    assert f"<tr><td><code>200:refused_in_stream</code> ({phrase})</td>" in html
    assert f"<p>refused_in_stream 7: each {phrase}" in html
    assert "refused 13 (6 fast, 7 in disguise as 2xx), failed 0" in html
