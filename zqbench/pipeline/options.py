"""`RunOptions`: everything a run takes besides its scenario file, checked when built.

An invalid `RunOptions` cannot exist: `__post_init__` turns choice strings into their
enums and raises `OptionError` (naming the field, in the library's words) for a bad value.
What depends on the scenario (its SLOs, its api) is checked by the plan stage.

`RunOptions` is flat, as the command line is (a field per flag); each stage takes only the
groups it uses, by concern:

    PlanOptions          plan      the scenario, its scaling and overrides, SLOs, seed, workers
    TargetOptions        target    the endpoint (or the embedded server), model, API, prompts
    HookOptions          execute   what runs beside the load: telemetry, server metrics, hooks
    ConnectionOptions    execute   the transport: HTTP/2, pool, warm-up, TLS, the spin
    DistributedOptions   execute   --distributed: the master and its workers
    ValidityOptions      analyze   when a run is invalid rather than slow
    OutputOptions        run       where the outputs go, which are rendered, the exit code
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from zqbench.distributed.auth import read_secret
from zqbench.errors import OptionError
from zqbench.hooks.contract import RunHook
from zqbench.option_values import (
    ApiChoice,
    CalibrationMode,
    Choice,
    H1Client,
    ServerEngine,
    ServerScheduler,
    check_above,
    check_at_least,
    check_target,
    parse_headers,
    read_api_key,
)
from zqbench.redact import remember_secret
from zqbench.scenario import Scenario

_G = TypeVar("_G")

# The fields whose value is one of a Choice's, each with its enum.
_CHOICES: dict[str, type[Choice]] = {
    "api": ApiChoice,
    "h1_client": H1Client,
    "calibration": CalibrationMode,
    "server_engine": ServerEngine,
    "server_scheduler": ServerScheduler,
}


@dataclass(frozen=True, slots=True)
class PlanOptions:
    scenario: str | Scenario
    api: ApiChoice | None
    rate_scale: float
    duration_scale: float
    max_tokens: int | None
    timeout_s: float | None
    graceful_stop_s: float | None  # --graceful-stop: overrides the scenario's [load] one
    slos: tuple[str, ...]
    seed: int
    workers: int
    http2: bool  # refused with a scenario of cold connections
    dataset: str | None  # --dataset PATH: the requests are its rows


@dataclass(frozen=True, slots=True)
class TargetOptions:
    target: str | None
    api: ApiChoice | None
    model: str | None
    strict_model: bool
    headers: tuple[str, ...]
    api_key_env: str | None
    insecure: bool
    http2: bool  # the control plane speaks it too: a target may serve h2c only
    max_context: int | None
    calibration: CalibrationMode
    server_engine: ServerEngine
    server_scheduler: ServerScheduler
    server_args: tuple[str, ...]
    server_wrap: tuple[str, ...]
    server_env: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class HookOptions:
    telemetry: tuple[str, ...]
    server_metrics: bool
    hooks: tuple[RunHook, ...]
    insecure: bool
    metrics_port: int | None
    metrics_host: str | None


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    http2: bool
    h1_client: H1Client
    max_connections: int
    warm_connections: int | None
    insecure: bool
    spin_us: int


@dataclass(frozen=True, slots=True)
class DistributedOptions:
    distributed: bool
    expect_workers: int
    master_bind: str
    worker_wait_s: float
    max_lost_share: float
    api_key_env: str | None
    secret_env: str | None


@dataclass(frozen=True, slots=True)
class ValidityOptions:
    min_samples: int | None
    max_schedule_lag_s: float | None
    min_achieved_ratio: float | None
    min_ratio_samples: int | None


@dataclass(frozen=True, slots=True)
class OutputOptions:
    out: Path | None
    reports_root: Path
    html: bool
    inconclusive_fails: bool


class _Group(Generic[_G]):
    """A read-only attribute of RunOptions: the fields of `kind`, taken from it by name."""

    def __init__(self, kind: type[_G]) -> None:
        self.kind = kind
        self.names = tuple(f.name for f in dataclasses.fields(kind))  # type: ignore[arg-type]

    def __get__(self, options: object, owner: type | None = None) -> _G:
        return self.kind(**{name: getattr(options, name) for name in self.names})


@dataclass(frozen=True, slots=True)
class RunOptions:
    """A run's options; the field names are the `zqbench run` parameter names."""

    scenario: str | Scenario = "burst"  # a bundled name, a TOML path, or a loaded scenario
    target: str | None = None  # None: start the bundled reference server
    # None: auto with a target (zqbench.target.resolve probes it), else the scenario's
    api: ApiChoice | None = None
    model: str | None = None  # None: GET /v1/models (a target), /health (the embedded server)
    strict_model: bool = False  # no model named and several listed: fail, not the first
    headers: tuple[str, ...] = ()  # "Name: value"
    api_key_env: str | None = None  # the key is read from this variable, never from argv
    http2: bool = False
    h1_client: H1Client = H1Client.raw
    workers: int = 1
    seed: int = 0
    rate_scale: float = 1.0
    duration_scale: float = 1.0
    slos: tuple[str, ...] = ()  # added to the scenario's
    out: Path | None = None
    reports_root: Path = Path("reports")
    max_connections: int = 1024
    warm_connections: int | None = None  # None: sized from the expected concurrency
    timeout_s: float | None = None  # overrides the scenario's per-request timeout
    graceful_stop_s: float | None = None  # overrides the scenario's [load] graceful_stop
    max_tokens: int | None = None
    dataset: str | None = None  # a dataset file whose rows are the requests (from the cwd)
    insecure: bool = False
    spin_us: int = 1500
    inconclusive_fails: bool = True
    # The embedded reference server (used when target is None).
    server_engine: ServerEngine = ServerEngine.auto
    server_scheduler: ServerScheduler = ServerScheduler.zero_queue
    server_args: tuple[str, ...] = ()
    # `zqbench profile`: the profiler the embedded server runs under, and its environment.
    server_wrap: tuple[str, ...] = ()
    server_env: tuple[tuple[str, str], ...] = ()
    calibration: CalibrationMode = CalibrationMode.auto  # prompt sizing (zqbench.target.calibrate)
    max_context: int | None = None  # clamp classes to it; None: the target's /health says
    html: bool = True  # render report.html (a sweep may skip it for its steps)
    telemetry: tuple[str, ...] = ()  # --telemetry sources: nvml, auto, prometheus:URL
    server_metrics: bool = True  # scrape the target's /metrics when a known engine serves it
    hooks: tuple[RunHook, ...] = ()  # impairment, telemetry, ...: started at t = 0, always stopped
    # Serve the run so far as a Prometheus exposition (zqbench.exporter); None: the
    # scenario's [metrics], else none. 0: any free port. Host None: loopback.
    metrics_port: int | None = None
    metrics_host: str | None = None
    # Validity limits; None: the scenario's [validity], else zqbench's defaults.
    min_samples: int | None = None
    max_schedule_lag_s: float | None = None
    min_achieved_ratio: float | None = None
    min_ratio_samples: int | None = None
    # Load from many machines (zqbench.distributed): the schedule split over Locust workers.
    distributed: bool = False
    expect_workers: int = 1  # the workers to wait for; the schedule is split that many ways
    master_bind: str = "127.0.0.1:5557"  # HOST:PORT the workers connect to: loopback
    worker_wait_s: float = 60.0  # for the expected workers to join
    max_lost_share: float = 0.0  # of the run, lost with dead workers, before it is invalid
    secret_env: str | None = None  # the shared secret's variable; None: ZQBENCH_SECRET

    def __post_init__(self) -> None:
        for name, kind in _CHOICES.items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, kind.parse(value, name))
        if self.target is not None:
            check_target(self.target)
        check_at_least("workers", self.workers, 1)
        _check_at_most_workers("workers", self.workers)
        check_at_least("max_context", self.max_context, 2, " tokens")
        check_above("rate_scale", self.rate_scale, 0)
        check_above("duration_scale", self.duration_scale, 0)
        check_at_least("min_samples", self.min_samples, 1)
        check_at_least("min_ratio_samples", self.min_ratio_samples, 2)
        if self.max_schedule_lag_s is not None:
            check_above("max_schedule_lag", self.max_schedule_lag_s, 0)
        if self.min_achieved_ratio is not None:
            check_above("min_achieved_ratio", self.min_achieved_ratio, 0)
            if self.min_achieved_ratio > 1:
                raise OptionError(
                    "min_achieved_ratio",
                    "must be a fraction of the offered load, 0 < r <= 1",
                    value=f"{self.min_achieved_ratio:g}",
                )
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise OptionError(
                "metrics_port", "must be a TCP port, 0-65535", value=str(self.metrics_port)
            )
        if self.metrics_host is not None and not self.metrics_host.strip():
            raise OptionError(
                "metrics_host", "must be an address to listen on, e.g. 127.0.0.1", value='""'
            )
        parse_headers(self.headers)
        read_api_key(self.api_key_env)
        if self.distributed:
            self._check_distributed()

    # Each stage's groups: the same values, typed by concern (`_Group` builds them).
    plan = _Group(PlanOptions)
    endpoint = _Group(TargetOptions)
    beside = _Group(HookOptions)
    connection = _Group(ConnectionOptions)
    distribution = _Group(DistributedOptions)
    validity = _Group(ValidityOptions)
    output = _Group(OutputOptions)

    def _check_distributed(self) -> None:
        """The schedule is split over the workers: --workers is theirs to set, not ours."""
        check_at_least("expect_workers", self.expect_workers, 1)
        _check_at_most_workers("expect_workers", self.expect_workers)
        check_above("worker_wait_s", self.worker_wait_s, 0)
        if not 0 <= self.max_lost_share <= 1:
            raise OptionError(
                "max_lost_share",
                "must be a fraction, 0 <= f <= 1",
                value=f"{self.max_lost_share:g}",
            )
        if self.workers not in (1, self.expect_workers):
            raise OptionError(
                "workers",
                "a --distributed run is split over --expect-workers; drop --workers",
                value=str(self.workers),
            )
        object.__setattr__(self, "workers", self.expect_workers)
        remember_secret(read_secret(self.secret_env).decode())


MAX_WORKERS = 1024  # each is a process (or a machine) with its share of the plan


def _check_at_most_workers(option: str, n: int) -> None:
    """A share of the plan is built per worker before anything starts: 10**8 of them took
    gigabytes and minutes before the first line (#25, found by fuzzing)."""
    if n > MAX_WORKERS:
        raise OptionError(
            option, f"at most {MAX_WORKERS} (one process, or machine, each)", value=str(n)
        )
