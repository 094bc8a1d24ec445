"""PrometheusScraper: scrape a /metrics endpoint during a run, so remote targets get analysed.

Every `interval_s` (default 250 ms) a thread GETs the URL through the control-plane client
(each scrape bounded by `timeout_s`, its body capped), parses the text exposition format
with prometheus_client's parser and keeps the series zqbench understands, under one
canonical name per quantity:

    canonical                        scraped as
    gpu_util (0..1, per gpu label)   DCGM_FI_DEV_GPU_UTIL (0..100)
    num_requests_waiting             vllm:num_requests_waiting, refserver_num_requests_waiting
    num_requests_running             vllm:num_requests_running, refserver_num_requests_running
    request_queue_time_seconds_sum   vllm:request_queue_time_seconds_sum, refserver_...
    request_queue_time_seconds_count vllm:request_queue_time_seconds_count, refserver_...

On stop it writes telemetry.prometheus.parquet (every value kept) and, when DCGM gave GPU
utilization, telemetry.gpu.parquet and gpu_density. Queue figures over the run: the mean
and max of num_requests_waiting, and the mean queue time from the histogram's growth
(sum and count at the last scrape minus the first). A failed scrape is counted and
reported, never fatal: telemetry must not end a run.

DCGM exporter averages utilization over its collect interval (30 s by default); run it
with `-c 1000` or less for a meaningful gpu_density.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from zqbench.control import ControlClient
from zqbench.errors import OptionError
from zqbench.hooks import HookContext, HookResult
from zqbench.telemetry import table
from zqbench.telemetry.sampler import add_gpu_density, poll_every

INTERVAL_S = 0.25
TIMEOUT_S = 2.0
GPU_UTIL = "gpu_util"
ALIASES = {
    "DCGM_FI_DEV_GPU_UTIL": GPU_UTIL,
    "vllm:num_requests_waiting": "num_requests_waiting",
    "vllm:num_requests_running": "num_requests_running",
    "vllm:request_queue_time_seconds_sum": "request_queue_time_seconds_sum",
    "vllm:request_queue_time_seconds_count": "request_queue_time_seconds_count",
    "refserver_num_requests_waiting": "num_requests_waiting",
    "refserver_num_requests_running": "num_requests_running",
    "refserver_request_queue_time_seconds_sum": "request_queue_time_seconds_sum",
    "refserver_request_queue_time_seconds_count": "request_queue_time_seconds_count",
}

ACCEPT = (("accept", "text/plain; version=0.0.4"),)  # the text format, not protobuf


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(
            "telemetry",
            "expected an http(s) URL, e.g. prometheus:http://gpu-host:9400/metrics",
            value=f"prometheus:{url}",
        )
    return url


def parse(text: str) -> list[tuple[str, str, dict[str, str], float]]:
    """(canonical, scraped name, labels, value) of every series zqbench understands."""
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            canonical = ALIASES.get(sample.name)
            if canonical is None:
                continue
            value = float(sample.value)
            if canonical == GPU_UTIL:
                value /= 100.0  # DCGM reports percent
            found.append((canonical, sample.name, dict(sample.labels), value))
    return found


def _gpu_index(labels: dict[str, str]) -> int:
    try:
        return int(labels.get("gpu", "0"))
    except ValueError:
        return 0


class PrometheusScraper:
    name = "prometheus"

    def __init__(
        self,
        url: str,
        *,
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
        primary: bool = True,
    ) -> None:
        """`primary`: its GPU readings are the run's telemetry.gpu.parquet and gpu_density
        (False when NVML samples the same run)."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.url = check_url(url)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.primary = primary
        self._client: ControlClient | None = None
        self._rows: dict[str, list[Any]] = {
            "t_epoch_ns": [],
            "metric": [],
            "source_metric": [],
            "labels": [],
            "value": [],
        }
        self._scrapes = 0
        self._failed = 0
        self._last_error = ""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: HookContext | None = None
        self._anchor_ns = 0

    def start(self, ctx: HookContext) -> None:
        self._ctx = ctx
        self._anchor_ns = time.time_ns() - time.perf_counter_ns()
        # Made here, not in the thread: its set-up (the trust store) stays out of the first
        # scrape's timing. The thread is its only user until stop().
        self._client = ControlClient(timeout_s=self.timeout_s)
        self._thread = threading.Thread(target=self._loop, name="zqbench-prometheus", daemon=True)
        self._thread.start()

    def _scrape(self) -> None:
        if self._client is None:  # not started
            return
        sent = time.perf_counter_ns()
        try:
            found = parse(self._client.get_text(self.url, headers=ACCEPT))
        except Exception as exc:  # unreachable, HTTP error, unparsable: count it, go on
            self._failed += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            return
        # The values were read somewhere between sending and receiving: use the midpoint.
        t_epoch = self._anchor_ns + (sent + time.perf_counter_ns()) // 2
        self._scrapes += 1
        for canonical, scraped, labels, value in found:
            self._rows["t_epoch_ns"].append(t_epoch)
            self._rows["metric"].append(canonical)
            self._rows["source_metric"].append(scraped)
            self._rows["labels"].append(json.dumps(labels, sort_keys=True))
            self._rows["value"].append(value)

    def _loop(self) -> None:
        poll_every(self.interval_s, self._stopping, self._scrape)

    def stop(self) -> HookResult:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 2.0)
        if self._client is not None and not (self._thread and self._thread.is_alive()):
            self._client.close()
        result = HookResult()
        ctx = self._ctx
        if ctx is None:
            return result
        table.write_table(ctx.out_dir / table.PROMETHEUS_TABLE, table.PROMETHEUS_SCHEMA, self._rows)
        frame = pd.DataFrame(self._rows)
        result.environment = {
            "url": self.url,
            "interval_s": self.interval_s,
            "scrapes": self._scrapes,
            "failed_scrapes": self._failed,
            "metrics": sorted(set(self._rows["source_metric"])),
        }
        if self._failed:
            result.notes.append(
                f"prometheus: {self._failed} of {self._failed + self._scrapes} scrapes of "
                f"{self.url} failed ({self._last_error})"
            )
        result.telemetry.update(queue_figures(frame))
        gpu = gpu_rows(frame)
        if gpu.empty:
            if self.primary:
                result.notes.append(
                    f"gpu_density unavailable: no DCGM_FI_DEV_GPU_UTIL at {self.url}"
                )
            return result
        if self.primary:
            table.write_table(ctx.out_dir / table.GPU_TABLE, table.GPU_SCHEMA, gpu.to_dict("list"))
        key = "gpu_density" if self.primary else "gpu_density_prometheus"
        start_epoch_ns = self._anchor_ns + ctx.start_monotonic_ns
        add_gpu_density(result, key, gpu, ctx.out_dir, start_epoch_ns)
        return result


def gpu_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """DCGM utilization in the telemetry.gpu.parquet shape."""
    if frame.empty:
        return pd.DataFrame(columns=["t_epoch_ns", "gpu", "util", "source"])
    rows = frame[frame["metric"] == GPU_UTIL]
    return pd.DataFrame(
        {
            "t_epoch_ns": rows["t_epoch_ns"].astype("int64"),
            "gpu": [_gpu_index(json.loads(s)) for s in rows["labels"]],
            "util": rows["value"].astype("float64"),
            "source": "prometheus",
        }
    ).reset_index(drop=True)


def queue_figures(frame: pd.DataFrame) -> dict[str, float]:
    """Server queue over the run; a quantity the endpoint does not export is left out."""
    out: dict[str, float] = {}
    if frame.empty:
        return out
    # Several series (one per model or engine) add up to the server's total per scrape.
    per_scrape = frame.groupby(["metric", "t_epoch_ns"])["value"].sum()
    if "num_requests_waiting" in per_scrape.index.get_level_values(0):
        waiting = per_scrape["num_requests_waiting"]
        out["server_requests_waiting_mean"] = float(waiting.mean())
        out["server_requests_waiting_max"] = float(waiting.max())
    names = set(per_scrape.index.get_level_values(0))
    if {"request_queue_time_seconds_sum", "request_queue_time_seconds_count"} <= names:
        total = per_scrape["request_queue_time_seconds_sum"]
        count = per_scrape["request_queue_time_seconds_count"]
        d_count = float(count.iloc[-1] - count.iloc[0])
        if d_count > 0:
            d_sum = float(total.iloc[-1] - total.iloc[0])
            out["server_queue_time_mean_s"] = d_sum / d_count
    return out
