"""`RunOptions`: everything a run takes besides its scenario file, in groups, checked when built.

A group per concern, each a frozen dataclass and a field of `RunOptions`; a stage takes the
groups it uses by attribute (`make_plan(options.plan, options.endpoint)`):

    plan          PlanOptions         plan     the scenario, its scaling, overrides, SLOs, seed
    endpoint      TargetOptions       target   the endpoint, model, API and how it is reached
    server        ServerOptions       target   the bundled reference server (no --target)
    beside        HookOptions         hooks    beside the load: telemetry, server metrics, hooks
    connection    ConnectionOptions   execute  the load's pool, warm-up, HTTP/1.1 client, spin
    distribution  DistributedOptions  execute  --distributed: the master and its workers
    validity      ValidityOptions     analyze  when a run is invalid rather than slow
    output        OutputOptions       run      the output folder, report.html or not, exit code

Every field is in one group only. How the endpoint is reached (TLS, HTTP/2, headers, the key's
variable) travels on with the `Endpoint` the target stage returns, for the stages after it.

An invalid group cannot exist: its `__post_init__` turns choice strings into their enums and
raises `OptionError` (naming the field, in the library's words) for a bad value; `RunOptions`
checks what spans two groups. What depends on the scenario (its SLOs, its api) is checked by
the plan stage. A new option is a field of its group and, when it needs one, a check there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _choose(options: object, name: str, kind: type[Choice]) -> None:
    """The field `name` as its enum (a string is parsed: OptionError when not a choice)."""
    value = getattr(options, name)
    if value is not None:
        object.__setattr__(options, name, kind.parse(value, name))


@dataclass(frozen=True, slots=True)
class PlanOptions:
    scenario: str | Scenario = "burst"  # a bundled name, a TOML path, or a loaded scenario
    rate_scale: float = 1.0
    duration_scale: float = 1.0
    max_tokens: int | None = None
    timeout_s: float | None = None  # overrides the scenario's per-request timeout
    graceful_stop_s: float | None = None  # overrides the scenario's [load] graceful_stop
    slos: tuple[str, ...] = ()  # added to the scenario's
    seed: int = 0
    workers: int = 1
    dataset: str | None = None  # a dataset file whose rows are the requests (from the cwd)

    def __post_init__(self) -> None:
        check_at_least("workers", self.workers, 1)
        _check_at_most_workers("workers", self.workers)
        check_above("rate_scale", self.rate_scale, 0)
        check_above("duration_scale", self.duration_scale, 0)


@dataclass(frozen=True, slots=True)
class TargetOptions:
    target: str | None = None  # None: start the bundled reference server
    # None: auto with a target (zqbench.target.resolve probes it), else the scenario's
    api: ApiChoice | None = None
    model: str | None = None  # None: GET /v1/models (a target), /health (the embedded server)
    strict_model: bool = False  # no model named and several listed: fail, not the first
    headers: tuple[str, ...] = ()  # "Name: value"
    api_key_env: str | None = None  # the key is read from this variable, never from argv
    insecure: bool = False
    http2: bool = False  # the control plane speaks it too: a target may serve h2c only
    max_context: int | None = None  # clamp classes to it; None: the target's /health says
    calibration: CalibrationMode = CalibrationMode.auto  # prompt sizing (zqbench.target.calibrate)

    def __post_init__(self) -> None:
        _choose(self, "api", ApiChoice)
        _choose(self, "calibration", CalibrationMode)
        if self.target is not None:
            check_target(self.target)
        check_at_least("max_context", self.max_context, 2, " tokens")
        parse_headers(self.headers)
        read_api_key(self.api_key_env)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """The bundled reference server, started when there is no --target."""

    server_engine: ServerEngine = ServerEngine.auto
    server_scheduler: ServerScheduler = ServerScheduler.zero_queue
    server_args: tuple[str, ...] = ()
    # `zqbench profile`: the profiler the embedded server runs under, and its environment.
    server_wrap: tuple[str, ...] = ()
    server_env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _choose(self, "server_engine", ServerEngine)
        _choose(self, "server_scheduler", ServerScheduler)


@dataclass(frozen=True, slots=True)
class HookOptions:
    telemetry: tuple[str, ...] = ()  # --telemetry sources: nvml, auto, prometheus:URL
    server_metrics: bool = True  # scrape the target's /metrics when a known engine serves it
    hooks: tuple[RunHook, ...] = ()  # impairment, telemetry, ...: started at t = 0, always stopped
    # Serve the run so far as a Prometheus exposition (zqbench.exporter); None: the
    # scenario's [metrics], else none. 0: any free port. Host None: loopback.
    metrics_port: int | None = None
    metrics_host: str | None = None

    def __post_init__(self) -> None:
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise OptionError(
                "metrics_port", "must be a TCP port, 0-65535", value=str(self.metrics_port)
            )
        if self.metrics_host is not None and not self.metrics_host.strip():
            raise OptionError(
                "metrics_host", "must be an address to listen on, e.g. 127.0.0.1", value='""'
            )


MAX_CONNECTIONS = 65_535


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    h1_client: H1Client = H1Client.raw
    max_connections: int = 1024
    warm_connections: int | None = None  # None: sized from the expected concurrency
    spin_us: int = 1500

    def __post_init__(self) -> None:
        _choose(self, "h1_client", H1Client)
        # 0 left every send waiting for a connection none could open, for the whole run; a
        # pool past the TCP port space cannot be opened to one target (#44).
        check_at_least("max_connections", self.max_connections, 1)
        if self.max_connections > MAX_CONNECTIONS:
            raise OptionError(
                "max_connections",
                f"at most {MAX_CONNECTIONS} (one TCP port each, to one target)",
                value=str(self.max_connections),
            )
        if self.warm_connections is not None:
            check_at_least("warm_connections", self.warm_connections, 0)
        check_at_least("spin_us", self.spin_us, 0)


@dataclass(frozen=True, slots=True)
class DistributedOptions:
    """Load from many machines (zqbench.distributed): the schedule split over Locust workers."""

    distributed: bool = False
    expect_workers: int = 1  # the workers to wait for; the schedule is split that many ways
    master_bind: str = "127.0.0.1:5557"  # HOST:PORT the workers connect to: loopback
    worker_wait_s: float = 60.0  # for the expected workers to join
    max_lost_share: float = 0.0  # of the run, lost with dead workers, before it is invalid
    secret_env: str | None = None  # the shared secret's variable; None: ZQBENCH_SECRET

    def __post_init__(self) -> None:
        if not self.distributed:
            return
        check_at_least("expect_workers", self.expect_workers, 1)
        _check_at_most_workers("expect_workers", self.expect_workers)
        check_above("worker_wait_s", self.worker_wait_s, 0)
        if not 0 <= self.max_lost_share <= 1:
            raise OptionError(
                "max_lost_share",
                "must be a fraction, 0 <= f <= 1",
                value=f"{self.max_lost_share:g}",
            )
        remember_secret(read_secret(self.secret_env).decode())


@dataclass(frozen=True, slots=True)
class ValidityOptions:
    """Validity limits; None: the scenario's [validity], else zqbench's defaults."""

    min_samples: int | None = None
    max_schedule_lag_s: float | None = None
    max_client_lag_s: float | None = None
    min_achieved_ratio: float | None = None
    min_ratio_samples: int | None = None

    def __post_init__(self) -> None:
        check_at_least("min_samples", self.min_samples, 1)
        check_at_least("min_ratio_samples", self.min_ratio_samples, 2)
        if self.max_schedule_lag_s is not None:
            check_above("max_schedule_lag", self.max_schedule_lag_s, 0)
        if self.max_client_lag_s is not None:
            check_above("max_client_lag", self.max_client_lag_s, 0)
        if self.min_achieved_ratio is not None:
            check_above("min_achieved_ratio", self.min_achieved_ratio, 0)
            if self.min_achieved_ratio > 1:
                raise OptionError(
                    "min_achieved_ratio",
                    "must be a fraction of the offered load, 0 < r <= 1",
                    value=f"{self.min_achieved_ratio:g}",
                )


@dataclass(frozen=True, slots=True)
class OutputOptions:
    out: Path | None = None
    reports_root: Path = Path("reports")
    html: bool = True  # render report.html (a sweep may skip it for its steps)
    inconclusive_fails: bool = True


@dataclass(frozen=True, slots=True)
class RunOptions:
    """A run's options, a group per concern (the module's docstring lists them)."""

    plan: PlanOptions = field(default_factory=PlanOptions)
    endpoint: TargetOptions = field(default_factory=TargetOptions)
    server: ServerOptions = field(default_factory=ServerOptions)
    beside: HookOptions = field(default_factory=HookOptions)
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    distribution: DistributedOptions = field(default_factory=DistributedOptions)
    validity: ValidityOptions = field(default_factory=ValidityOptions)
    output: OutputOptions = field(default_factory=OutputOptions)

    def __post_init__(self) -> None:
        if self.distribution.distributed:
            # The schedule is split over the workers: --workers is theirs to set, not ours.
            expected = self.distribution.expect_workers
            if self.plan.workers not in (1, expected):
                raise OptionError(
                    "workers",
                    "a --distributed run is split over --expect-workers; drop --workers",
                    value=str(self.plan.workers),
                )
            object.__setattr__(self, "plan", dataclasses.replace(self.plan, workers=expected))

    @classmethod
    def of(cls, **fields: Any) -> RunOptions:
        """The options from the groups' field names, flat as on the command line
        (`RunOptions.of(target=url, workers=2)`): each goes to the one group that has it."""
        given: dict[str, dict[str, Any]] = {}
        for name, value in fields.items():
            if name not in _GROUP_OF:
                raise TypeError(f"RunOptions has no option {name!r}")
            given.setdefault(_GROUP_OF[name], {})[name] = value
        return cls(**{group: kind(**given.get(group, {})) for group, kind in GROUPS.items()})


# Each group's attribute of RunOptions and its dataclass; then which group has each field.
GROUPS: dict[str, Any] = {f.name: f.default_factory for f in dataclasses.fields(RunOptions)}
_GROUP_OF = {f.name: g for g, kind in GROUPS.items() for f in dataclasses.fields(kind)}

MAX_WORKERS = 1024  # each is a process (or a machine) with its share of the plan


def _check_at_most_workers(option: str, n: int) -> None:
    """A share of the plan is built per worker before anything starts: 10**8 of them took
    gigabytes and minutes before the first line (#25, found by fuzzing)."""
    if n > MAX_WORKERS:
        raise OptionError(
            option, f"at most {MAX_WORKERS} (one process, or machine, each)", value=str(n)
        )
