"""`hooks_for_run`: the hooks a run needs, from its scenario and its `--telemetry` sources.

    scenario [network] packet-loss       -> PacketLossHook (after preflight: root + nft)
    --telemetry nvml                     -> NvmlSampler (fails if NVML does not start)
    --telemetry auto                     -> NvmlSampler when the target is on this machine
                                            and NVML starts; nothing otherwise
    --telemetry prometheus:URL           -> PrometheusScraper(URL), one per source

Called before any traffic, so a missing permission or a bad source fails the run at once
(exit 2) rather than halfway.
"""

from __future__ import annotations

from collections.abc import Sequence

from zqbench.errors import OptionError
from zqbench.hooks import RunHook
from zqbench.scenario import Scenario

TELEMETRY_HELP = "nvml, auto, or prometheus:URL (a /metrics endpoint); repeatable"


def hooks_for_run(
    scenario: Scenario,
    *,
    telemetry: Sequence[str] = (),
    target_host: str = "",
    target_port: int = 0,
) -> list[RunHook]:
    """Impairment first (it shapes the traffic), then the telemetry sources."""
    hooks: list[RunHook] = []
    if scenario.network is not None:
        from zqbench.impair import PacketLossHook, preflight

        preflight()
        hooks.append(PacketLossHook(scenario.network))
    if telemetry:
        hooks.extend(telemetry_hooks(telemetry, target_host))
    return hooks


def telemetry_hooks(sources: Sequence[str], target_host: str) -> list[RunHook]:
    """One sampler per source. NVML, when it runs, owns gpu_density and the GPU table; a
    Prometheus source then reports its own as gpu_density_prometheus."""
    from zqbench.telemetry import nvml, prometheus

    sources = [s.strip() for s in sources]
    urls: list[str] = []
    want_nvml = False
    for source in sources:
        if source.startswith("prometheus:"):
            urls.append(prometheus.check_url(source.removeprefix("prometheus:")))
        elif source not in ("nvml", "auto"):
            raise OptionError("telemetry", f"expected {TELEMETRY_HELP}", value=repr(source))
    hooks: list[RunHook] = []
    if "nvml" in sources:
        hooks.append(nvml.NvmlSampler.open())
        want_nvml = True
    elif "auto" in sources and nvml.is_local(target_host):
        sampler = nvml.NvmlSampler.try_open()
        if sampler is not None:
            hooks.append(sampler)
            want_nvml = True
    hooks.extend(prometheus.PrometheusScraper(url, primary=not want_nvml) for url in urls)
    return hooks
