"""report.html and the figures: self-contained, secrets-free, one figure per available view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.reporting.conftest import uniform_run
from tests.reporting.synth import write_synthetic_run
from zqbench.outputs import plots
from zqbench.outputs.render import frame_of, render_report_html
from zqbench.saved.run import load_run

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_report_command_renders_every_output(rendered_run: Path) -> None:
    for name in ("summary.md", "junit.xml", "report.html"):
        assert (rendered_run / name).stat().st_size > 0
    figures = sorted(p.stem for p in (rendered_run / "plots").glob("*.png"))
    assert figures == [
        "dispatch",
        "gpu",
        "histograms",
        "percentiles",
        "schedule_lag",
        "status_mix",
        "timeline",
    ]
    for png in (rendered_run / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.slow
def test_html_is_self_contained_and_redacted(rendered_run: Path) -> None:
    page = (rendered_run / "report.html").read_text()
    # No attribute may point anywhere but an inline data: URI.
    refs = re.findall(r'(?:src|href)\s*=\s*"?([^"\s>]+)', page)
    assert refs and all(ref.startswith("data:image/png;base64,") for ref in refs)
    assert "<script" not in page and "@import" not in page and "url(" not in page
    assert page.count("<img") == 7
    for secret in ("hunter2", "sk-ant-secret", "sk-secret"):
        assert secret not in page


def _run_data(run: Path) -> plots.RunData:
    saved = load_run(run)
    return plots.RunData(saved.summary, frame_of(saved.summary, saved.samples()))


def test_runs_without_headers_or_telemetry_skip_those_figures(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path / "bare", headers=False)
    data = _run_data(tmp_path / "bare")
    assert plots.dispatch(data) is None
    assert plots.gpu(data) is None
    assert not (tmp_path / "dispatch.png").exists()


def test_many_samples_draw_bands_not_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above SCATTER_MAX a time plot draws per-bin bands: no per-request scatter."""
    write_synthetic_run(tmp_path / "run", n=3000)
    data = _run_data(tmp_path / "run")
    monkeypatch.setattr(plots, "SCATTER_MAX", 1000)
    fig = plots._figure()
    ax = fig.axes[0]
    data.time_series(ax, data.values_s("latency") * 1e3, "b", "lat")
    labels = [h.get_label() for h in ax.get_legend_handles_labels()[0]]
    assert labels == ["lat p50-p99 per bin", "lat p50", "lat max"]
    assert not ax.collections[1:]  # only the band, no scatter collection


def test_banner_lists_each_slo_with_value_threshold_ci(tmp_path: Path) -> None:
    """Latencies 10..29.995 ms: latency p99 = 29.795 ms, shown in the SLO's unit."""
    run = uniform_run(tmp_path / "u", slos=["latency:p99<50ms", "errors:rate<1%"])
    page = render_report_html(load_run(run).summary, [])
    assert '<section id="verdict" class="banner pass" data-verdict="pass">' in page
    row = re.search(r'<tr data-expr="latency:p99&lt;50ms" data-verdict="pass">(.*?)</tr>', page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells[1:5] == ["29.79 ms", "50 ms", "[29.73 ms, 29.86 ms]", "pass"]
