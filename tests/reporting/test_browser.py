"""report.html in headless Chromium with the network blocked: it renders exactly as saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reporting.chromium import Chromium, chromium_required, find_chromium
from zqbench.metrics.sections.text import request_counts
from zqbench.outputs.view import slo_ci, slo_threshold, slo_value
from zqbench.summary import Summary

pytestmark = [
    pytest.mark.skipif(
        find_chromium() is None and not chromium_required(),
        reason="chromium is not installed (CI installs it and never skips)",
    ),
    pytest.mark.slow,  # a headless browser: seconds to start on 2 busy cores
]


@pytest.fixture(scope="module")
def loaded(rendered_run: Path):
    pytest.importorskip("websocket") if not chromium_required() else None
    with Chromium() as browser:
        return browser.open(rendered_run / "report.html")


def test_no_console_errors_and_no_failed_or_outside_loads(loaded) -> None:
    assert loaded.console_errors == []
    assert loaded.failed_loads == []
    assert loaded.outside_requests == []
    assert all(url.startswith(("data:", "file:")) for url in loaded.probe["resources"])


def test_every_plot_decodes_with_nonzero_size(loaded) -> None:
    images = loaded.probe["images"]
    assert len(images) == 7
    for image in images:
        assert image["decoded"] is True
        assert image["w"] >= 500 and image["h"] >= 200


def test_banner_matches_summary_json(loaded, rendered_run: Path) -> None:
    summary = json.loads((rendered_run / "summary.json").read_text())
    assert loaded.probe["verdict"] == summary["verdict"]
    banner = loaded.probe["banner"]
    assert summary["verdict"].upper() in banner
    assert f"{summary['requests']['sent']:,} requests sent" in banner
    assert f": {request_counts(Summary.model_validate(summary))} ·" in banner
    rows = loaded.probe["rows"]
    assert [(r["expr"], r["verdict"]) for r in rows] == [
        (s["expr"], s["verdict"]) for s in summary["slos"]
    ]
    records = Summary.model_validate(summary).slos
    for row, slo, record in zip(rows, summary["slos"], records, strict=True):
        shown = [slo_value(record), slo_threshold(record), slo_ci(record)]
        assert row["cells"][1:5] == [*shown, slo["verdict"]]
        assert row["cells"][5] == slo["message"]
