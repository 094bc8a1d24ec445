"""`build_hooks`: the hooks a run needs, from its scenario and its `--telemetry` sources.

    scenario [network] packet-loss       -> PacketLossHook (after preflight: root + nft)
    --telemetry nvml                     -> NvmlSampler (fails if NVML does not start)
    --telemetry auto                     -> NvmlSampler when the target is on this machine
                                            and NVML starts; nothing otherwise
    --telemetry prometheus:URL           -> PrometheusScraper(URL), one per source
    the target's <origin>/metrics        -> PrometheusScraper when a known engine's metrics
      (unless --no-server-metrics)          are there (one bounded GET finds out), else
                                            NoServerMetrics, which records why not

Called before any traffic, so a missing permission or a bad source fails the run at once
(exit 2) rather than halfway. Looking for the server's metrics never fails a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from zqbench.errors import OptionError
from zqbench.hooks.contract import RunHook
from zqbench.pipeline.options import HookOptions
from zqbench.pipeline.target import Endpoint
from zqbench.redact import redact_url
from zqbench.scenario import Scenario

TELEMETRY_HELP = "nvml, auto, or prometheus:URL (a /metrics endpoint); repeatable"


def _no_note(line: str) -> None:
    pass


@dataclass(frozen=True)
class ServerMetrics:
    """Where to look for the target's own metrics, and whether to (`enabled`)."""

    base_url: str
    enabled: bool = True
    insecure: bool = False
    on_note: Callable[[str], None] = _no_note  # a line for the terminal (what was found)

    def hooks(self, telemetry: Sequence[str]) -> list[RunHook]:
        """A scraper of the target's /metrics when a known engine serves it; else the hook
        that records why not. None when --telemetry already scrapes that URL."""
        from zqbench.telemetry import discovery, prometheus

        if not self.enabled:
            return [discovery.NoServerMetrics("not looked for (--no-server-metrics)")]
        url = discovery.metrics_url(self.base_url)
        explicit = [s.strip().removeprefix("prometheus:") for s in telemetry]
        if any(_same_url(url, other) for other in explicit):
            return []  # scraped once, as --telemetry asked; its engine is recognised there
        found = discovery.discover(self.base_url, insecure=self.insecure)
        if found.engine is None:
            self.on_note(f"server metrics: none ({found.reason})")
            return [discovery.NoServerMetrics(found.reason, url)]
        self.on_note(f"server metrics: {found.engine.name} at {redact_url(found.url)}")
        scraper = prometheus.PrometheusScraper(
            url,
            primary=False,  # an engine's /metrics has no GPU readings to own
            found_by="discovery",
            engine=found.engine,
            insecure=self.insecure,
            name="server_metrics",
        )
        return [scraper]


def _same_url(a: str, b: str) -> bool:
    """The same scheme, host, port and path (a trailing slash aside)."""
    try:
        pa, pb = urlsplit(a), urlsplit(b)
        port_a, port_b = pa.port, pb.port
    except ValueError:
        return False
    default = {"http": 80, "https": 443}
    return (
        pa.scheme == pb.scheme
        and pa.hostname == pb.hostname
        and (port_a or default.get(pa.scheme)) == (port_b or default.get(pb.scheme))
        and pa.path.rstrip("/") == pb.path.rstrip("/")
    )


def telemetry_hooks(sources: Sequence[str], target_host: str) -> list[RunHook]:
    """One sampler per source. NVML, when it runs, owns gpu_density and the GPU table; a
    Prometheus source then reports its own as gpu_density_prometheus."""
    from zqbench.telemetry import nvml, prometheus

    sources = [s.strip() for s in sources]
    urls: list[str] = []
    for source in sources:
        if source.startswith("prometheus:"):
            urls.append(prometheus.check_url(source.removeprefix("prometheus:")))
        elif source not in ("nvml", "auto"):
            raise OptionError("telemetry", f"expected {TELEMETRY_HELP}", value=repr(source))
    hooks: list[RunHook] = []
    if "nvml" in sources:
        hooks.append(nvml.NvmlSampler.open())
    elif "auto" in sources and nvml.is_local(target_host):
        sampler = nvml.NvmlSampler.try_open()
        if sampler is not None:
            hooks.append(sampler)
    nvml_runs = bool(hooks)
    hooks.extend(prometheus.PrometheusScraper(url, primary=not nvml_runs) for url in urls)
    return hooks


def build_hooks(
    options: HookOptions,
    scenario: Scenario,
    endpoint: Endpoint,
    *,
    on_note: Callable[[str], None] | None = None,
) -> list[RunHook]:
    """The scenario's impairment first (it shapes the traffic), then the telemetry sources
    and the target's own metrics (found on its origin unless `options.server_metrics` is
    off), then the caller's hooks.

    Called before any request: impairment preflight and telemetry sources fail here;
    `on_note` hears which server metrics were found, or why none."""
    hooks: list[RunHook] = []
    if scenario.network is not None:
        from zqbench.impair import PacketLossHook, preflight

        preflight()
        hooks.append(PacketLossHook(scenario.network))
    if options.telemetry:
        hooks.extend(telemetry_hooks(options.telemetry, endpoint.host))
    server_metrics = ServerMetrics(
        endpoint.base_url,
        enabled=options.server_metrics,
        insecure=endpoint.access.insecure,
        on_note=on_note or _no_note,
    )
    return [*hooks, *server_metrics.hooks(options.telemetry), *options.hooks]
