"""`--metrics-port`: the exposition during a real run, its last scrape against summary.json,
and the port's errors before any load."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.core.conftest import write_scenario, zqbench_here
from zqbench.errors import EXIT_USAGE
from zqbench.pipeline.run import RunOptions, run_scenario


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


class Scraper:
    """Scrapes a URL every 0.1 s on a thread, as Prometheus would; keeps every answer."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.texts: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def note(self, line: str) -> None:
        if line.startswith("metrics: serving the run so far at "):
            self.url = line.rsplit(" ", 1)[1]

    def _loop(self) -> None:
        for _ in range(1200):  # 2 min at most
            if self._stop.is_set():
                return
            if self.url is not None:
                with contextlib.suppress(httpx.HTTPError):  # not up yet, or gone
                    self.texts.append(httpx.get(self.url, timeout=2).text)
            time.sleep(0.1)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.mark.slow  # a scaled burst against the embedded server, about 8 s
def test_the_last_scrape_agrees_with_summary_json(tmp_path: Path) -> None:
    with Scraper() as scraper:
        result = run_scenario(
            RunOptions.of(
                scenario="burst", server_engine="sim", rate_scale=0.2, duration_scale=0.1,
                out=tmp_path / "run", metrics_port=0, html=False,
            ),
            on_target=scraper.note,
        )  # fmt: skip
    assert scraper.url is not None and scraper.url.startswith("http://127.0.0.1:")
    assert len(scraper.texts) > 20
    summary = result.summary
    last = _families(scraper.texts[-1])
    by_status: dict[str, float] = {}
    for s in last["zqbench_requests"]:
        by_status[s.labels["status"]] = by_status.get(s.labels["status"], 0) + s.value
    assert by_status == {k: float(v) for k, v in summary.status_codes.items()}
    assert {s.labels["stage_name"] for s in last["zqbench_requests"]} == {
        "baseline", "pulse", "recovery",
    }  # fmt: skip
    (sent,) = last["zqbench_requests_sent"]
    assert sent.value == summary.requests.sent
    (inflight,) = last["zqbench_requests_in_flight"]
    assert inflight.value == 0
    ttft_count = sum(s.value for s in last["zqbench_ttft_seconds"] if s.name.endswith("_count"))
    assert ttft_count == summary.metrics["ttft"].n
    reject_count = sum(
        s.value for s in last["zqbench_time_to_reject_seconds"] if s.name.endswith("_count")
    )
    assert reject_count == summary.metrics["time_to_reject"].n
    slos = {s.labels["slo"]: s.value for s in last["zqbench_slo_threshold"]}
    assert slos == {"ttft:p99<100ms": 0.1, "latency:p99/p50<=1.15": 1.15,
                    "time_to_reject:p99<50ms": 0.05}  # fmt: skip
    holds = {s.labels["slo"]: s.value for s in last["zqbench_slo_holds"]}
    gate = {r.expr: r.verdict for r in summary.slos}
    for expr, verdict in gate.items():
        if verdict in ("pass", "fail"):  # the live estimate agrees where the gate decided
            assert holds[expr] == (1.0 if verdict == "pass" else 0.0), (expr, verdict)
    # The reference server's own queue, as zqbench scraped it, is re-exported.
    server = {s.labels["metric"] for s in last["zqbench_server_metric"]}
    assert {"num_requests_running", "num_requests_waiting"} <= server
    # The counts only grow, scrape after scrape.
    sents = [_families(t)["zqbench_requests_sent"][0].value for t in scraper.texts]
    assert sents == sorted(sents) and sents[0] < sents[-1]


def test_a_port_in_use_is_exit_2_before_any_load(tmp_path: Path) -> None:
    """The target is a listening socket nobody accepts on: had zqbench contacted it (model
    discovery, calibration), a connection would be waiting in its backlog."""
    with socket.socket() as target, socket.socket() as taken:
        target.bind(("127.0.0.1", 0))
        target.listen(8)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        url = f"http://127.0.0.1:{target.getsockname()[1]}"
        out = tmp_path / "run"
        result = zqbench_here("run", "smoke", "--target", url, "--metrics-port", str(port),
                              "--out", str(out), "-q")  # fmt: skip
        assert result.returncode == EXIT_USAGE
        assert result.stderr.splitlines() == [
            f"zqbench: error: metrics port 127.0.0.1:{port} is in use; choose another "
            "--metrics-port (0: any free port)"
        ]
        target.setblocking(False)
        with pytest.raises(BlockingIOError):
            target.accept()  # nothing ever connected
        assert not out.exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--metrics-port", "65536"], "--metrics-port 65536: must be a TCP port, 0-65535"),
        (["--metrics-port", "0", "--metrics-host", ""],
         '--metrics-host "": must be an address to listen on, e.g. 127.0.0.1'),
        (["--metrics-port", "0", "--metrics-host", "no.such.host.invalid"],
         "cannot serve metrics on no.such.host.invalid:0"),
    ],
)  # fmt: skip
def test_bad_metrics_options_are_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    result = zqbench_here("run", "smoke", "--target", "http://127.0.0.1:1", *args,
                          "--out", str(tmp_path / "run"), "-q")  # fmt: skip
    assert result.returncode == EXIT_USAGE, result.stderr
    (only,) = result.stderr.splitlines()
    assert only.startswith(f"zqbench: error: {line}"), only


def test_a_scenarios_metrics_table_is_checked(tmp_path: Path) -> None:
    body = (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 1\nduration = "1s"\n'
        '[metrics]\nhost = "127.0.0.1"\n'
    )
    path = write_scenario(tmp_path, body)
    result = zqbench_here("run", str(path), "--target", "http://127.0.0.1:1", "-q")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.splitlines() == [
        f"zqbench: error: {path}: metrics.port is missing: the port to serve the run's "
        "metrics on (0: any free one)"
    ]
