"""Build docs/dashboards/zqbench.json, the zero-queue dashboard, with Grafana's own
grafana-foundation-sdk (its typed builders follow each Grafana release's schema; grafanalib,
the other choice, is a community project last released in January 2024).

    .venv/bin/python docs/dashboards/generate.py            # rewrites zqbench.json
    .venv/bin/python docs/dashboards/generate.py --check    # exit 1 if it is out of date

One dashboard for a zqbench run (`zqbench run --metrics-port`) and the reference server
beside it: a row per zero-queue dimension, then the status mix, the queue and the SLOs.
tests/exporter/test_prometheus.py evaluates every panel's expression on a real Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

OUT = Path(__file__).with_name("zqbench.json")
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"

# Expressions that have no series without a GPU (NVML): absent, never 0. The Prometheus
# test checks `refserver_gpu_telemetry_available` says why instead.
GPU_ONLY = ("refserver_gpu_utilization_density",)


def _q(expr: str, legend: str, ref: str) -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)


def _series(
    title: str, unit: str, queries: list[tuple[str, str]], description: str, *, no_value: str = ""
) -> timeseries.Panel:
    panel = (
        timeseries.Panel().title(title).description(description).unit(unit).datasource(DS)
        .height(8).span(12)
    )  # fmt: skip
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_q(expr, legend, chr(ord("A") + i)))
    return panel.no_value(no_value) if no_value else panel


def _stat(title: str, unit: str, expr: str, legend: str, description: str) -> stat.Panel:
    return (
        stat.Panel().title(title).description(description).unit(unit).datasource(DS)
        .height(8).span(12).with_target(_q(expr, legend, "A"))
    )  # fmt: skip


def _quantile(q: float, metric: str, by: str = "") -> str:
    group = f"le{', ' + by if by else ''}"
    return f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket[{RATE}])))"


def build() -> dict:
    ratio = (
        f"{_quantile(0.99, 'zqbench_latency_seconds', 'class')} / "
        f"{_quantile(0.5, 'zqbench_latency_seconds', 'class')}"
    )
    board = (
        dashboard.Dashboard("zqbench: zero-queue")
        .uid("zqbench-zero-queue")
        .description("A zqbench run (--metrics-port) and the reference server it drives.")
        .tags(["zqbench", "zero-queue"])
        .refresh("5s")
        .time("now-15m", "now")
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        # The seed's first dimension: GPU utilization density per request.
        .with_row(dashboard.Row("GPU utilization density"))
        .with_panel(_series(
            "GPU utilization density", "percentunit",
            [("refserver_gpu_utilization_density", "density")],
            "Mean GPU busy fraction while a slot is in use (NVML). Absent without a GPU.",
            no_value="absent: no GPU telemetry (see 'GPU telemetry')",
        ))
        .with_panel(_stat(
            "GPU telemetry", "none", "refserver_gpu_telemetry_available", "{{reason}}",
            "1: density is measured; 0: it is not, and the legend says why.",
        ))
        # The second: dispatch jitter.
        .with_row(dashboard.Row("Dispatch jitter"))
        .with_panel(_series(
            "Dispatch jitter (last 100 dispatches)", "s",
            [("refserver_dispatch_jitter_seconds", "jitter")],
            "Standard deviation of received-to-compute-start over the last 100 requests.",
        ))
        .with_panel(_series(
            "Dispatch delay p99", "s",
            [(_quantile(0.99, "refserver_request_dispatch_delay_seconds"), "server p99")],
            "Received to first compute step, from the server's histogram.",
        ))
        # The third, as far as a server can tell: how many sequences run at once.
        .with_row(dashboard.Row("Running against the slots"))
        .with_panel(_series(
            "Running / slots", "none",
            [("refserver_num_requests_running", "running"), ("refserver_num_slots", "slots"),
             ('zqbench_server_metric{metric="num_requests_running"}', "running (scraped)")],
            "Sequences holding a slot, against the slots there are.",
        ))
        .with_panel(_series(
            "In flight", "none", [("zqbench_requests_in_flight", "zqbench in flight")],
            "Requests zqbench has sent and not yet seen end.",
        ))
        # What a user sees.
        .with_row(dashboard.Row("Status mix"))
        .with_panel(_series(
            "Requests by status", "reqps",
            [(f"sum by (status) (rate(zqbench_requests_total[{RATE}]))", "{{status}}")],
            "Ended requests per second, by HTTP status (bounded labels).",
        ))
        .with_panel(_series(
            "Outcome shares", "percentunit",
            [(f"sum by (outcome) (rate(zqbench_requests_total[{RATE}])) / ignoring(outcome) "
              f"group_left sum(rate(zqbench_requests_total[{RATE}]))", "{{outcome}}")],
            "ok, refused (429/503/529), refused_in_stream (a refusal in disguise: 2xx, overload "
            "error inside), timed_out, failed: each as a share of ended requests.",
        ))
        .with_panel(_series(
            "Offered and sent", "reqps",
            [(f"rate(zqbench_requests_due_total[{RATE}])", "offered"),
             (f"rate(zqbench_requests_sent_total[{RATE}])", "sent")],
            "Open loop: the schedule's rate against what went out.",
        ))
        .with_panel(_series(
            "Time to reject p99", "s",
            [(_quantile(0.99, "zqbench_time_to_reject_seconds"), "client p99"),
             (_quantile(0.99, "refserver_time_to_reject_seconds"), "server p99")],
            "A zero-queue refusal is immediate; a slow one is a queue in disguise.",
        ))
        # The queue zero-queue must not have.
        .with_row(dashboard.Row("The queue"))
        .with_panel(_series(
            "Latency p50 / p99", "s",
            [(_quantile(0.5, "zqbench_latency_seconds"), "p50"),
             (_quantile(0.99, "zqbench_latency_seconds"), "p99")],
            "Successful requests, from zqbench's buckets.",
        ))
        .with_panel(_series(
            "Latency P99/P50 by class", "none", [(ratio, "{{class}}")],
            "The zero-queue ratio: near 1.05-1.15 without a queue.",
        ))
        .with_panel(_series(
            "TTFT p99", "s", [(_quantile(0.99, "zqbench_ttft_seconds", "class"), "{{class}}")],
            "Time to first token of successful requests.",
        ))
        .with_panel(_series(
            "Waiting on the server", "none",
            [("refserver_num_requests_waiting", "waiting"),
             (_quantile(0.99, "refserver_request_queue_time_seconds"), "queue time p99 (s)")],
            "Requests parked for a slot (fifo), and how long they wait.",
        ))
        # The verdict so far.
        .with_row(dashboard.Row("SLOs"))
        .with_panel(_stat(
            "SLO holds so far", "none", "zqbench_slo_holds", "{{slo}}",
            "1 while the live estimate holds; the verdict is summary.json's.",
        ))
        .with_panel(_series(
            "SLO value and threshold", "none",
            [("zqbench_slo_value", "{{slo}}"), ("zqbench_slo_threshold", "{{slo}} threshold")],
            "Each SLO's estimate so far (base units) against its threshold.",
        ))
        .with_panel(_series(
            "Schedule lag p99", "s", [(_quantile(0.99, "zqbench_schedule_lag_seconds"), "p99")],
            "The generator's own lateness: a run past its bound is invalid, not slow.",
        ))
    )  # fmt: skip
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def expressions(doc: dict) -> list[str]:
    """Every panel target's PromQL, in the dashboard's order."""
    return [t["expr"] for p in doc["panels"] if p.get("type") != "row" for t in p["targets"]]


def render(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if zqbench.json is stale")
    args = parser.parse_args()
    text = render(build())
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
