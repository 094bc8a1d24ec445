"""zqbench's own metrics, served live while a run lasts (`--metrics-port`)."""

from zqbench.exporter.endpoint import DEFAULT_HOST, MetricsEndpoint

__all__ = ["DEFAULT_HOST", "MetricsEndpoint"]
