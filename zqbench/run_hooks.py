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

from zqbench.errors import UsageError
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
    for source in telemetry:
        hooks.extend(_telemetry_hook(source.strip(), target_host))
    return hooks


def _telemetry_hook(source: str, target_host: str) -> list[RunHook]:
    from zqbench.telemetry import nvml, prometheus

    if source == "nvml":
        return [nvml.NvmlSampler.open()]
    if source == "auto":
        if not nvml.is_local(target_host):
            return []
        sampler = nvml.NvmlSampler.try_open()
        return [sampler] if sampler is not None else []
    if source.startswith("prometheus:"):
        return [prometheus.PrometheusScraper(prometheus.check_url(source[len("prometheus:") :]))]
    raise UsageError(f"--telemetry {source!r}: expected {TELEMETRY_HELP}")
