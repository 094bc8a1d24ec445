"""The exposition text: what prometheus_client's own parser reads back from it."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.exporter.test_live_counts import _sample
from zqbench.engines.live import LiveStats, merge_snapshots
from zqbench.exporter import MetricsEndpoint
from zqbench.exporter.collector import RunLabels
from zqbench.metrics.slo import parse_slo
from zqbench.samples.live_counts import BUCKETS_S, LiveCounts

ODD = 'a "quoted" \\ back\nslash'


def _endpoint(host: str = "127.0.0.1") -> MetricsEndpoint:
    labels = RunLabels(scenario=ODD, run="r", stage_names=(ODD,), slos=(parse_slo("ttft:p99<1s"),))
    return MetricsEndpoint(host, 0, labels)


def test_odd_label_values_survive_the_parser() -> None:
    stats = LiveStats(counts=LiveCounts())
    for i in range(50):
        assert stats.counts is not None
        stats.counts.record(_sample(i, stage=0, cls=ODD, status=200, error=None, latency_ms=7))
    with _endpoint() as live:
        live.observe(merge_snapshots([stats.snapshot()]))
        text = httpx.get(live.url, timeout=5).text
        assert httpx.get(live.url.replace("/metrics", "/nope"), timeout=5).status_code == 404
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (run,) = families["zqbench_run_info"].samples
    assert run.labels["scenario"] == ODD
    (row,) = families["zqbench_requests"].samples
    assert (row.labels["class"], row.labels["stage_name"], row.value) == (ODD, ODD, 50)
    ttft = families["zqbench_ttft_seconds"]
    assert ttft.type == "histogram"
    buckets = [s for s in ttft.samples if s.name.endswith("_bucket")]
    assert [s.labels["le"] for s in buckets][-1] == "+Inf"
    assert len(buckets) == len(BUCKETS_S) + 1
    # 7 ms latencies, first token at a quarter: 1.75 ms, in the (0.0015, 0.002] bucket.
    counts = {s.labels["le"]: s.value for s in buckets}
    assert counts["0.0015"] == 0 and counts["0.002"] == 50
    (holds,) = families["zqbench_slo_holds"].samples
    assert holds.value == 1


def test_ipv6_loopback() -> None:
    with _endpoint("::1") as live:
        assert live.url.startswith("http://[::1]:")
        assert "zqbench_requests_sent_total 0" in httpx.get(live.url, timeout=5).text
