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
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from zqbench.engines.live import Progress
from zqbench.errors import UsageError
from zqbench.exporter.collector import Exposition, LiveState, RunLabels

DEFAULT_HOST = "127.0.0.1"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
FINAL_SCRAPE_MAX_S = 30.0


class MetricsEndpoint:
    """A bound exposition; `observe` is the progress callback that feeds it."""

    def __init__(self, host: str, port: int, labels: RunLabels) -> None:
        self.state = LiveState()
        self.exposition = Exposition(labels, self.state)
        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
            server_class = type("_Server", (_ThreadingServer,), {"address_family": family})
            server: WSGIServer = make_server(host, port, self._app, server_class, _QuietHandler)
        except OSError as exc:  # in use, not allowed, no such address
            raise UsageError(_bind_error(host, port, exc)) from None
        self._server = server
        # A short poll: shutdown() waits for the loop to look, 0.5 s by default, on every run.
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name="zqbench-metrics", daemon=True
        )
        self._thread.start()
        self.host, self.port = host, int(server.server_address[1])

    def _app(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the exposition is at /metrics\n"]
        body = self.exposition.render().encode()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE),
                                  ("Content-Length", str(len(body)))])  # fmt: skip
        return [body]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def observe(self, progress: Progress) -> None:
        """The progress callback; one reference replaced, so a
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


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scraper that hangs never holds zqbench's exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # stdlib's name
        pass  # a scrape a second would flood the terminal


def _bind_error(host: str, port: int, exc: OSError) -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"metrics port {where} is in use; choose another --metrics-port (0: any free port)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"metrics port {where}: not allowed ({exc.strerror}); choose a port above 1023"
    reason = exc.strerror or str(exc)
    return f"cannot serve metrics on {where} ({reason}); check --metrics-host and --metrics-port"
