"""What packet loss did, in summary.json, summary.md, report.html, its plot and the terminal.

The run is synthetic with every number known (tests/reporting/synth.py,
packet_loss_latencies_ms): baseline P99 50 ms, P99 under loss 250 ms (5x, +200 ms), 2 of
the loss stage's 100 requests reset (2 %), recovered 1.5 s after the loss ended at 20 s.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.reporting.synth import LOSS_HOOK_RECORD, packet_loss_latencies_ms, write_packet_loss_run
from zqbench.cli import app
from zqbench.metrics.sections.packet_loss import lines as packet_loss_lines
from zqbench.saved.run import load_run

pytestmark = pytest.mark.slow  # full reports rendered (every figure): seconds each

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

MD_ROWS = [
    "| loss | 10% of packets, each direction, in stage 1 (loss) |",
    "| rules in place | 10.003–20.004 s |",
    "| dropped packets | 1,234 |",
    "| latency P99 | 250 ms under loss against 50 ms baseline (5×, +200 ms) |",
    "| error share under loss | 2.00% |",
    "| recovery | recovered 1.5 s after the loss ended at 20.00 s (t = 21.50 s): from there"
    " the P99 of the next 2 s of requests is within 10% of the baseline P99 |",
    "| stage 0 (baseline) |  | 100 | 0 | 0.00% | 50 | 1× |",
    "| stage 1 (loss) | yes | 100 | 2 | 2.00% | 250 | 5× |",
    "| stage 2 (recovery) |  | 100 | 0 | 0.00% | 200 | 4× |",
]


def _report(run: Path) -> None:
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def loss_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("loss") / "run"
    write_packet_loss_run(run)
    _report(run)
    return run


def test_summary_json_carries_the_analysis(loss_run: Path) -> None:
    data = json.loads((loss_run / "summary.json").read_text())["packet_loss"]
    assert data["loss"] == 0.1
    assert data["impaired_stages"] == [1] and data["baseline_stages"] == [0]
    assert data["windows"] == [{"applied_s": 10.003, "removed_s": 20.004}]
    assert data["dropped_packets"] == 1234
    assert data["baseline_p99_s"] == pytest.approx(0.05)
    assert data["loss_p99_s"] == pytest.approx(0.25)
    assert data["p99_delta_s"] == pytest.approx(0.2)
    assert data["p99_ratio"] == pytest.approx(5.0)
    assert data["loss_error_share"] == pytest.approx(0.02)
    rows = [(s["stage"], s["impaired"], s["requests"], s["errors"]) for s in data["stages"]]
    assert rows == [(0, False, 100, 0), (1, True, 100, 2), (2, False, 100, 0)]
    assert [s["p99_ratio"] for s in data["stages"]] == pytest.approx([1.0, 5.0, 4.0])
    assert data["recovery"]["recovered"] is True
    assert data["recovery"]["recovery_s"] == pytest.approx(1.5)
    assert data["recovery"]["after_s"] == 20.0


def test_summary_md_shows_the_known_numbers(loss_run: Path) -> None:
    md = (loss_run / "summary.md").read_text()
    assert "### Packet loss" in md
    for row in MD_ROWS:
        assert row in md


def test_report_html_shows_the_section_and_its_plot(loss_run: Path) -> None:
    page = (loss_run / "report.html").read_text()
    section = page[page.index('<section id="packet-loss">') :]
    section = section[: section.index("</section>")]
    assert "<h2>Packet loss</h2>" in section
    assert "<tr><td>rules in place</td><td>10.003–20.004 s</td></tr>" in section
    assert (
        "<tr><td>latency P99</td><td>250 ms under loss against 50 ms baseline"
        " (5×, +200 ms)</td></tr>"
    ) in section
    assert "<tr><td>error share under loss</td><td>2.00%</td></tr>" in section
    assert "recovered 1.5 s after the loss ended at 20.00 s (t = 21.50 s)" in section
    assert (
        '<tr><td>stage 1 (loss)</td><td>yes</td><td class="num">100</td><td class="num">2</td>'
        '<td class="num">2.00%</td><td class="num">250</td><td class="num">5×</td></tr>'
    ) in section
    assert '<figure id="plot-packet_loss"><img alt="Latency under packet loss"' in section
    assert page.count('id="plot-packet_loss"') == 1  # in its section, not also under Figures

    png = loss_run / "plots" / "packet_loss.png"
    assert png.read_bytes()[:8] == PNG_MAGIC
    with Image.open(png) as image:
        image.verify()
        assert image.size[0] >= 600 and image.size[1] >= 200


def test_terminal_shows_two_lines(loss_run: Path) -> None:
    assert packet_loss_lines(load_run(loss_run).summary) == [
        "packet loss: 10% of packets, each direction, in stage 1 (loss);"
        " rules in place 10.003–20.004 s; 1,234 packets dropped",
        "  latency P99 250 ms under loss against 50 ms baseline (5×, +200 ms);"
        " error share under loss 2.00%; recovered 1.5 s after the loss ended at 20.00 s"
        " (t = 21.50 s)",
    ]


def test_a_run_that_never_recovers_says_so(tmp_path: Path) -> None:
    """12 % above the baseline P99 after the loss: never back within 10 %."""
    latency, failed = packet_loss_latencies_ms()
    latency[200:] = 56.0
    run = tmp_path / "run"
    summary = write_packet_loss_run(run, latency_ms=latency, failed=failed)
    assert summary.packet_loss is not None
    assert summary.packet_loss.recovery.recovered is False
    assert summary.packet_loss.recovery.recovery_s is None
    _report(run)
    md = (run / "summary.md").read_text()
    assert (
        "| recovery | did not recover within the run (at no time after the loss was the P99"
        " of the next 2 s of requests within 10% of the baseline P99) |"
    ) in md
    assert packet_loss_lines(summary)[1].endswith("; did not recover within the run")
    assert (run / "plots" / "packet_loss.png").read_bytes()[:8] == PNG_MAGIC


def test_rules_never_removed_and_never_applied_are_shown(tmp_path: Path) -> None:
    record = {**LOSS_HOOK_RECORD, "windows": [{"applied_s": 10.003}]}
    summary = write_packet_loss_run(tmp_path / "a", hook_record=record)
    assert summary.packet_loss is not None
    assert summary.packet_loss.windows[0].removed_s is None
    assert "rules in place from 10.003 s, never removed;" in packet_loss_lines(summary)[0]
    record = {**LOSS_HOOK_RECORD, "windows": [], "dropped_packets": 0}
    summary = write_packet_loss_run(tmp_path / "b", hook_record=record)
    assert "rules in place never applied (see the run's notes);" in packet_loss_lines(summary)[0]


def test_saved_run_redraws_the_plot_and_gate_keeps_the_analysis(loss_run: Path) -> None:
    """`zqbench report` draws the plot again from summary.json and the samples; `gate
    --write` re-summarizes the run and keeps its packet_loss as the run recorded it."""
    run = Path(shutil.copytree(loss_run, loss_run.parent / "copy"))
    (run / "plots" / "packet_loss.png").unlink()
    (run / "report.html").unlink()
    _report(run)
    assert (run / "plots" / "packet_loss.png").read_bytes()[:8] == PNG_MAGIC
    assert '<section id="packet-loss">' in (run / "report.html").read_text()

    before = load_run(run).summary.packet_loss
    result = runner.invoke(app, ["gate", str(run), "--slo", "errors:rate<5%", "--write"])
    assert result.exit_code == 0, result.output
    after = load_run(run).summary
    assert after.packet_loss == before
    assert [s.expr for s in after.slos] == ["errors:rate<5%"]
    assert "### Packet loss" in (run / "summary.md").read_text()


def test_a_run_without_impairment_has_no_key_and_no_section(tmp_path: Path) -> None:
    latency, _ = packet_loss_latencies_ms()
    summary = write_packet_loss_run(
        tmp_path / "run", hook_record={}, latency_ms=latency, failed=np.zeros(300, bool)
    )
    assert summary.packet_loss is None
    assert "packet_loss" not in json.loads((tmp_path / "run" / "summary.json").read_text())
    _report(tmp_path / "run")
    assert "Packet loss" not in (tmp_path / "run" / "summary.md").read_text()
    assert 'id="packet-loss"' not in (tmp_path / "run" / "report.html").read_text()
    assert not (tmp_path / "run" / "plots" / "packet_loss.png").exists()
    assert packet_loss_lines(summary) == []
