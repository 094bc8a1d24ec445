"""A --distributed run serves the exposition from the master, with every worker's counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.core.test_distributed import _cluster, _free_port, _log, _summary
from tests.exporter.test_metrics_endpoint import Scraper
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow  # a master and two workers, about 10 s


def test_the_master_serves_both_workers_counts(tmp_path: Path, ref_server: EmbeddedServer) -> None:
    port = _free_port()
    with Scraper() as scraper:
        scraper.url = f"http://127.0.0.1:{port}/metrics"
        extra = ("--metrics-port", str(port))
        with _cluster(tmp_path, ref_server, duration="3s", workers=2, extra=extra) as (
            master,
            workers,
            out,
        ):
            assert master.wait(timeout=120) == 0, _log(tmp_path, "master")
            assert sorted(w.wait(timeout=30) for w in workers) == [0, 0]
    assert scraper.texts, _log(tmp_path, "master")
    families = {f.name: f.samples for f in text_string_to_metric_families(scraper.texts[-1])}
    summary = _summary(out)
    (workers_seen,) = families["zqbench_workers"]
    assert workers_seen.value == 2
    by_status: dict[str, float] = {}
    for s in families["zqbench_requests"]:
        by_status[s.labels["status"]] = by_status.get(s.labels["status"], 0) + s.value
    assert by_status == {k: float(v) for k, v in summary["status_codes"].items()}
    (sent,) = families["zqbench_requests_sent"]
    assert sent.value == summary["requests"]["sent"]
