"""Finding the target's own metrics: one bounded GET of `<origin>/metrics` before the run.

    found = discover("http://gpu-host:8000")   # Discovery(url, engine, reason)
    found.engine                               # engines.Engine, or None and found.reason

The target's origin (scheme, host, port; a path prefix dropped) is where vLLM, SGLang
(with --enable-metrics), TGI and the reference server serve /metrics. The engine is
recognised from the sample names (zqbench.telemetry.engines); when there is none, the
reason says why: an HTTP status (404), a failed call, text that is not Prometheus', or no
known engine's series. Through the control-plane client, bounded by `timeout_s`: a target
without metrics delays the run by one short call at most.

`NoServerMetrics` is the hook that carries that reason into summary.json (server_queue:
{"unavailable": reason}) when no scraper runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from zqbench.hooks.contract import HookContext, HookResult
from zqbench.redact import redact_url
from zqbench.summary import Unavailable
from zqbench.target.control import ControlError, get_text
from zqbench.telemetry.engines import Engine, recognise, third_party_names
from zqbench.telemetry.prometheus import ACCEPT, parse, sample_name
from zqbench.transport.origin import parse_base_url

TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Discovery:
    url: str  # <origin>/metrics
    engine: Engine | None
    reason: str = ""  # why no engine was found; "" when one was


def metrics_url(base_url: str) -> str:
    """`<origin>/metrics` of a target URL (its path prefix dropped)."""
    origin = parse_base_url(base_url)
    return f"{origin.scheme}://{origin.authority}/metrics"


def discover(base_url: str, *, insecure: bool = False, timeout_s: float = TIMEOUT_S) -> Discovery:
    """The engine whose metrics the target serves at its origin's /metrics, or why none."""
    url = metrics_url(base_url)
    shown = redact_url(url)
    try:
        text = get_text(url, headers=ACCEPT, insecure=insecure, timeout_s=timeout_s)
    except ControlError as exc:
        return Discovery(
            url, None, str(exc) if not exc.status else f"GET {shown}: HTTP {exc.status}"
        )
    engine = recognise({sample_name(line) for line in text.splitlines()})
    if engine is not None and _parses(text, known_only=True):
        return Discovery(url, engine)
    if not _parses(text, known_only=False):
        return Discovery(url, None, f"GET {shown}: the answer is not Prometheus text")
    return Discovery(url, None, f"GET {shown}: no known engine's series ({third_party_names()})")


def _parses(text: str, *, known_only: bool) -> bool:
    """Whether the text format parses: the series zqbench reads, or all of it (at least one)."""
    try:
        if known_only:
            return bool(parse(text))
        return any(True for _ in text_string_to_metric_families(text))
    except ValueError:
        return False


class NoServerMetrics:
    """A RunHook that scrapes nothing: it records why the run has no server metrics."""

    name = "server_metrics"

    def __init__(self, reason: str, url: str | None = None) -> None:
        self.reason = reason
        self.url = url

    def start(self, ctx: HookContext) -> None:
        pass

    def stop(self) -> HookResult:
        url = None if self.url is None else redact_url(self.url)
        return HookResult(
            environment={"url": url, "engine": None, "reason": self.reason},
            server_queue=Unavailable(unavailable=self.reason),
        )
