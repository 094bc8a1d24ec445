"""summary.md and report.html: two templates over one view model, escaped for each format."""

from __future__ import annotations

from pathlib import Path

import pytest

from zqbench.outputs.render import render_report_html, render_summary_md
from zqbench.outputs.view import build_view, ms
from zqbench.summary import Summary

from .conftest import make_summary

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"
EXAMPLE_RUNS = sorted(p.parent.name for p in EXAMPLES.glob("*/summary.json"))


def example(run: str) -> Summary:
    return Summary.model_validate_json((EXAMPLES / run / "summary.json").read_text())


@pytest.mark.parametrize("run", EXAMPLE_RUNS)
def test_committed_summary_md_is_reproduced(run: str) -> None:
    """Each committed example's summary.md is exactly what its summary.json renders to."""
    summary = example(run)
    assert render_summary_md(summary) == (EXAMPLES / run / "summary.md").read_text()


def test_html_shows_every_markdown_section() -> None:
    """The sections summary.md has (from the same view) are on the page too, same numbers."""
    summary = example("burst-zero-queue")
    page = render_report_html(summary, [])
    for heading in (
        "<h2>Status mix by stage</h2>",
        "<h2>Error migration: baseline vs overload</h2>",
        "<h2>Refusals</h2>",
    ):
        assert heading in page
    assert '<th class="num">stage 2 (recovery, 27.5 req/s)</th>' in page
    assert '<tr><td>stage 1 (pulse)</td><td class="num">27</td>' in page
    reject = summary.metrics["time_to_reject"]  # the example's own figures, as both show them
    assert f"{reject.n} refused (429/503/529); time_to_reject p50 {ms(reject.p50)} ms," in page
    assert '<p class="note">No figures.</p>' in page


def test_ttfb_is_shown_beside_ttft_in_both_formats() -> None:
    """TTFB is not TTFT: a server that sends headers at once while the request waits in
    its queue has a small TTFB and a large TTFT, so the reports show both, in that order."""
    summary = example("smoke-zero-queue")
    ttfb, ttft = summary.metrics["ttfb"], summary.metrics["ttft"]
    assert ttfb.p50 is not None and ttft.p50 is not None and ttfb.p50 < ttft.p50
    md = render_summary_md(summary)
    assert f"| `ttfb` | all | {ttfb.n} | {ms(ttfb.p50)} |" in md
    assert md.index("| `ttfb` |") < md.index("| `ttft` |")
    page = render_report_html(summary, [])
    assert page.index("<td><code>ttfb</code></td>") < page.index("<td><code>ttft</code></td>")


def test_html_shows_head_of_line_and_telemetry() -> None:
    page = render_report_html(example("mixed-length-fifo"), [])
    assert "<h2>Head-of-line blocking: stage 1 (mixed) vs stage 0 (baseline)</h2>" in page
    summary = make_summary([]).model_copy(update={"telemetry": {"gpu_density": 0.912345}})
    assert "<tr><td>gpu_density</td><td>0.9123</td></tr>" in render_report_html(summary, [])


def test_run_strings_are_escaped_for_each_format() -> None:
    """HTML escapes markup (autoescape); Markdown escapes what would break a table cell."""
    data = make_summary(["latency:p99<2s"]).model_dump(mode="json")
    data["scenario"]["name"] = "<script>alert(1)</script>"
    data["stages"][1]["name"] = "burst|x"
    data["status_codes"]["a|b\nc"] = 0
    summary = Summary.model_validate(data)
    page = render_report_html(summary, [("p", "T<i>", 'it\'s "q"', b"png")])
    assert "<script>" not in page
    assert "zqbench · &lt;script&gt;alert(1)&lt;/script&gt;</h1>" in page
    assert '<tr data-expr="latency:p99&lt;2s" data-verdict="pass">' in page
    assert "<b>T&lt;i&gt;.</b> it&#39;s &#34;q&#34;</figcaption>" in page
    text = render_summary_md(summary)
    assert "| `latency` | stage 1 (burst\\|x) | 500 |" in text
    assert "| `a\\|b c` | 0 | 0.00% |" in text


def test_secrets_are_redacted_in_the_view() -> None:
    summary = make_summary([]).model_copy(
        update={
            "target": "http://user:hunter2@127.0.0.1:8000/v1?api_key=sk-secret-0123456789",
            "environment": {"token": "sk-ant-secret-123456", "host": "ci"},
        }
    )
    view = build_view(summary)
    assert "hunter2" not in view.summary.target and "sk-secret" not in view.summary.target
    assert [(f.label, f.value) for f in view.environment] == [
        ("token", "<redacted>"),
        ("host", "ci"),
    ]
    for text in (render_summary_md(summary), render_report_html(summary, [])):
        assert "hunter2" not in text and "sk-secret" not in text and "sk-ant" not in text


def test_no_value_is_a_dash_and_infinity_a_symbol_in_both_formats() -> None:
    """An error-adjusted p99 on a failure is ∞; a stage with no rejection has no value."""
    # The first 20 requests (stage 0) fail.
    summary = make_summary([], failures=20)
    view = build_view(summary)
    row = next(r for r in view.metrics if (r.metric, r.group) == ("latency_error_adjusted", "all"))
    assert (row.p99, row.p999, row.maximum) == ("∞", "∞", "∞")
    no_reject = ("time_to_reject", "stage 1 (burst)")
    stage = next(r for r in view.metrics if (r.metric, r.group) == no_reject)
    assert (stage.n, stage.p50, stage.maximum) == ("0", "–", "–")
    text = render_summary_md(summary)
    assert "| `time_to_reject` | stage 1 (burst) | 0 | – | – | – | – | – |" in text
    page = render_report_html(summary, [])
    assert '<td>stage 1 (burst)</td><td class="num">0</td><td class="num">–</td>' in page


def test_markdown_shows_run_strings_as_text_never_as_html() -> None:
    """A Markdown renderer passes raw HTML through: a tag in a run's string is escaped."""
    data = make_summary(["latency:p99<2s"]).model_dump(mode="json")
    data["scenario"]["name"] = "<script>alert(1)</script>"
    data["stages"][1]["name"] = "<img src=x onerror=alert(2)>"
    data["target"] = "http://h/`<b>x</b>`"
    text = render_summary_md(Summary.model_validate(data))
    assert "<script" not in text and "<img" not in text and "<b>" not in text
    assert "## zqbench: ✅ PASS · &lt;script>alert(1)&lt;/script> → " in text
    assert "http://h/\\`&lt;b>x&lt;/b>\\`" in text
    assert "| `latency` | stage 1 (&lt;img src=x onerror=alert(2)>) | 500 |" in text
    assert "| `latency:p99<2s` |" in text, "an SLO in a code span is shown as written"
