"""`--metrics-port`: the run so far, served as a Prometheus exposition while zqbench runs.

The port is bound when the run is planned, before the target is contacted or the bundled
server started, so a port in use is exit 2 before any load. The endpoint then serves from
that moment until the run's outputs are written, and then until a regular scraper has read
the final counts (the same as summary.json's), at most 3 of its intervals and 30 s.
Loopback by default: the exposition names the target and the scenario, and has no
authentication (`--metrics-host` widens it, as its help says).
"""

from __future__ import annotations

import errno
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import start_http_server

from zqbench.errors import UsageError
from zqbench.exporter.collector import Figures, LiveState, RunCollector, RunLabels

DEFAULT_HOST = "127.0.0.1"
FINAL_SCRAPE_MAX_S = 30.0


class MetricsEndpoint:
    """A bound exposition; `observe` is the progress callback that feeds it."""

    def __init__(self, host: str, port: int, labels: RunLabels) -> None:
        self.state = LiveState()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RunCollector(labels, self.state))
        try:
            server, thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise UsageError(_bind_error(host, port, exc)) from None
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread
        self.host, self.port = host, int(server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def observe(self, progress: Figures) -> None:
        """The progress callback (engines.live.Progress); one reference replaced, so a
        scrape reads the figures before or after, never half of each."""
        self.state.progress = progress
        self.state.version += 1

    def watch_server(self, latest: Callable[[], dict[str, float]]) -> None:
        self.state.server = latest

    def await_final_scrape(self) -> float:
        """Wait until a regular scraper has read the final figures: at most 3 of its scrape
        intervals and FINAL_SCRAPE_MAX_S; not at all when nobody scrapes regularly. The
        seconds waited."""
        scrapes = list(self.state.scrapes)
        if len(scrapes) < 2:
            return 0.0
        gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(scrapes))
        interval = gaps[len(gaps) // 2]
        start = time.monotonic()
        deadline = start + min(3 * interval, FINAL_SCRAPE_MAX_S)
        final = self.state.version
        while time.monotonic() < deadline and self.state.scrapes[-1][1] < final:
            time.sleep(0.02)
        return time.monotonic() - start

    def close(self) -> None:
        self.await_final_scrape()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)

    def __enter__(self) -> MetricsEndpoint:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _bind_error(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"metrics port {where} is in use; choose another --metrics-port (0: any free port)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"metrics port {where}: not allowed ({exc.strerror}); choose a port above 1023"
    reason = exc.strerror or str(exc)
    return f"cannot serve metrics on {where} ({reason}); check --metrics-host and --metrics-port"
