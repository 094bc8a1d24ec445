"""PrometheusScraper: scrape a /metrics endpoint during a run, so remote targets get analysed.

Every `interval_s` (default 250 ms) a thread GETs the URL through the control-plane client
(each scrape bounded by `timeout_s`, its body capped), and once more when the run stops, so
the last scrape sees every request of the run. It keeps the series zqbench understands,
under one canonical name per quantity (`ALIASES`): gpu_util (0..1, per gpu label) from
DCGM_FI_DEV_GPU_UTIL (0..100), and each engine's series under the names of
zqbench.telemetry.engines (`Engine.series`). Only the lines of those series are parsed
(prometheus_client's parser), so a scrape of a large exposition costs little beside the load.

On stop it writes telemetry.prometheus.parquet (every value kept; several scrapers of one
run share it, each row naming its URL) and, when DCGM gave GPU utilization,
telemetry.gpu.parquet and gpu_density. When the series are an engine's, the result carries
the run's `ServerQueue` (zqbench.telemetry.server_queue: waiting and running requests, the
queue time's percentiles from the histogram's growth). The flat telemetry figures stay too:
the mean and max of num_requests_waiting and the mean queue time. A failed scrape is counted
and reported, never fatal: telemetry must not end a run.

DCGM exporter averages utilization over its collect interval (30 s by default); run it
with `-c 1000` or less for a meaningful gpu_density.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Literal
from urllib.parse import urlsplit

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from zqbench.errors import OptionError
from zqbench.hooks.contract import HookContext, HookResult
from zqbench.redact import redact_url
from zqbench.summary import ServerQueue, Unavailable
from zqbench.target.control import ControlClient
from zqbench.telemetry import table
from zqbench.telemetry.engines import ENGINES, Engine, recognise
from zqbench.telemetry.sampler import add_gpu_density, poll_every
from zqbench.telemetry.server_queue import Source, server_queue

INTERVAL_S = 0.25
TIMEOUT_S = 2.0
GPU_UTIL = "gpu_util"
ALIASES = {
    "DCGM_FI_DEV_GPU_UTIL": GPU_UTIL,
    **{name: canonical for engine in ENGINES for name, canonical in engine.series.items()},
}

ACCEPT = (("accept", "text/plain; version=0.0.4"),)  # the text format, not protobuf
FoundBy = Literal["discovery", "telemetry"]


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(
            "telemetry",
            "expected an http(s) URL, e.g. prometheus:http://gpu-host:9400/metrics",
            value=f"prometheus:{url}",
        )
    return url


def sample_name(line: str) -> str:
    """The sample name a line of the text format starts with ("" for a comment or blank)."""
    if not line or line[0] == "#":
        return ""
    return line.split("{", 1)[0].split(" ", 1)[0].strip()


def parse(text: str) -> list[tuple[str, str, dict[str, str], float]]:
    """(canonical, scraped name, labels, value) of every series zqbench understands."""
    found = []
    known = "\n".join(line for line in text.splitlines() if sample_name(line) in ALIASES)
    for family in text_string_to_metric_families(known + "\n"):
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
    def __init__(
        self,
        url: str,
        *,
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
        primary: bool = True,
        found_by: FoundBy = "telemetry",
        engine: Engine | None = None,
        insecure: bool = False,
        name: str = "prometheus",
    ) -> None:
        """`primary`: its GPU readings are the run's telemetry.gpu.parquet and gpu_density
        (False when NVML samples the same run). `found_by`, `engine`: how the URL was found
        (on the target's origin, or --telemetry) and the engine seen there, if known; an
        engine is otherwise recognised from the scraped names. `name`: the hook's, the key
        of its facts in summary.json's environment."""
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.url = check_url(url)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.primary = primary
        self.found_by: FoundBy = found_by
        self.engine = engine
        self.insecure = insecure
        self.name = name
        self._client: ControlClient | None = None
        # telemetry.prometheus.parquet's columns but the url, the same in every row
        self._rows: dict[str, list[Any]] = {
            f.name: [] for f in table.PROMETHEUS_SCHEMA if f.name != "url"
        }
        self._times: list[int] = []  # epoch ns of each successful scrape
        self._latest: dict[str, float] = {}  # the last scrape's series, summed over labels
        self._failed = 0
        self._last_error = ""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: HookContext | None = None
        self._anchor_ns = 0

    def latest(self) -> dict[str, float]:
        """The last scrape's figures by canonical name (summed over their labels; histogram
        buckets left out): what the live exposition re-exports."""
        return self._latest

    def start(self, ctx: HookContext) -> None:
        self._ctx = ctx
        self._anchor_ns = time.time_ns() - time.perf_counter_ns()
        # Made here, not in the thread: its set-up (the trust store) stays out of the first
        # scrape's timing. The thread is its only user until stop().
        self._client = ControlClient(timeout_s=self.timeout_s, insecure=self.insecure)
        self._thread = threading.Thread(target=self._loop, name=f"zqbench-{self.name}", daemon=True)
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
        self._times.append(t_epoch)
        latest: dict[str, float] = {}
        for canonical, _, labels, value in found:
            if "le" not in labels:  # a histogram's buckets are not one figure
                latest[canonical] = latest.get(canonical, 0.0) + value
        self._latest = latest  # replaced whole: a reader on another thread sees one scrape
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
        stopped = not (self._thread and self._thread.is_alive())
        if self._client is not None and stopped:
            self._scrape()  # the last word: requests that ended since the last tick count
            self._client.close()
        result = HookResult()
        ctx = self._ctx
        if ctx is None:
            return result
        frame = pd.DataFrame(self._rows)
        self._write_table(ctx, frame)
        result.environment = {
            "url": redact_url(self.url),
            "found_by": self.found_by,
            "interval_s": self.interval_s,
            "scrapes": len(self._times),
            "failed_scrapes": self._failed,
            "metrics": sorted(set(self._rows["source_metric"])),
        }
        if self._failed:
            result.notes.append(
                f"{self.name}: {self._failed} of {self._failed + len(self._times)} scrapes of "
                f"{redact_url(self.url)} failed ({self._last_error})"
            )
        if self.found_by == "telemetry":  # the flat figures, as before the server_queue section
            result.telemetry.update(queue_figures(frame))
        section = self._server_queue(frame, ctx)
        result.server_queue = section
        if isinstance(section, ServerQueue):
            result.environment["engine"] = section.engine
        self._gpu(result, frame, ctx)
        return result

    def _write_table(self, ctx: HookContext, frame: pd.DataFrame) -> None:
        """telemetry.prometheus.parquet; another scraper of this run may have written it.
        Nothing read (no series zqbench knows): no file, rather than an empty one."""
        path = ctx.out_dir / table.PROMETHEUS_TABLE
        if frame.empty:
            return
        columns = {**self._rows, "url": [redact_url(self.url)] * len(frame)}
        if path.is_file():
            before = pd.read_parquet(path)
            columns = {k: [*before[k].tolist(), *columns[k]] for k in columns}
        table.write_table(path, table.PROMETHEUS_SCHEMA, columns)

    def _server_queue(
        self, frame: pd.DataFrame, ctx: HookContext
    ) -> ServerQueue | Unavailable | None:
        """The run's ServerQueue when the series are an engine's, else why not (a reason,
        never a missing key: figures from another source of the run win over it)."""
        engine = self.engine or recognise(set(self._rows["source_metric"]))
        if not self._times:
            return Unavailable(
                unavailable=f"every scrape of {redact_url(self.url)} failed ({self._last_error})"
            )
        if engine is not None:
            source = Source(engine, redact_url(self.url), self.found_by)
            start_epoch_ns = self._anchor_ns + ctx.start_monotonic_ns
            return server_queue(frame, self._times, start_epoch_ns, source)
        if not gpu_rows(frame).empty:
            return Unavailable(
                unavailable=f"{redact_url(self.url)} serves GPU metrics (DCGM), no engine's "
                "queue series"
            )
        return Unavailable(unavailable=f"no known engine's series at {redact_url(self.url)}")

    def _gpu(self, result: HookResult, frame: pd.DataFrame, ctx: HookContext) -> None:
        """gpu_density and the GPU table from DCGM's readings, or the note that there were none."""
        gpu = gpu_rows(frame)
        if gpu.empty:
            if self.primary:
                result.notes.append(
                    f"gpu_density unavailable: no DCGM_FI_DEV_GPU_UTIL at {redact_url(self.url)}"
                )
            return
        if self.primary:
            table.write_table(ctx.out_dir / table.GPU_TABLE, table.GPU_SCHEMA, gpu.to_dict("list"))
        key = "gpu_density" if self.primary else "gpu_density_prometheus"
        start_epoch_ns = self._anchor_ns + ctx.start_monotonic_ns
        add_gpu_density(result, key, gpu, ctx.out_dir, start_epoch_ns)


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
