"""Stage 2, target: the endpoint the run measures, fitted to the plan -> `Target`.

    remote (--target URL): the URL checked, the port reachable, then the model and the API
        resolved and checked by one small request each (zqbench.target.resolve), before any load
    embedded (no --target): the bundled reference server started, its /health read (the
        model), the scenario's api kept

Then the prompts are fitted to it: every class whose prompt + max_tokens exceeds the
target's context is clamped, and prompt sizes are calibrated (bytes of text per token).
`open_endpoint` yields the `Endpoint` while it serves (and stops an embedded server when
the block ends); `fit_target` then fits the prompts to it and returns the `Target`. The two
are apart so that the run can build its hooks (impairment preflight, telemetry sources) in
between: after the target is known, before any request reaches it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zqbench.dialects.base import DialectConfig
from zqbench.errors import TargetError, UsageError
from zqbench.metrics.classify import DEFAULT_AT_REST_PROBES, DEFAULT_RULES
from zqbench.option_values import CalibrationMode, ServerEngine, parse_headers, read_api_key
from zqbench.pipeline.options import ServerOptions, TargetOptions
from zqbench.redact import redact_url
from zqbench.scenario import OutcomesConfig, Scenario
from zqbench.summary import (
    AtRest,
    Capacity,
    OutcomeBasis,
    OutcomeRules,
    TargetResolution,
    Unavailable,
)
from zqbench.target import control
from zqbench.target.at_rest import measure_at_rest, probe_sizes
from zqbench.target.calibrate import Calibration, calibrate
from zqbench.target.capacity import first_stated
from zqbench.target.control import check_reachable
from zqbench.target.embedded import EmbeddedServer, get_health
from zqbench.target.resolve import TIMEOUT_S as RESOLVE_TIMEOUT_S
from zqbench.target.resolve import Access, Resolution, Wanted, resolve_target
from zqbench.transport.origin import parse_base_url

NoteCallback = Callable[[str], None]

CALIBRATION_TIMEOUT_S = 10.0  # per probe: calibration must never stall a run for long
CALIBRATION_DEADLINE_S = 20.0  # every probe together
NOT_MEASURED = Unavailable(unavailable="not measured")
CONTEXT_HEADROOM = 0.98  # a clamped prompt keeps 2% spare: calibration is good to about 2%


@dataclass(frozen=True)
class Endpoint:
    """A reachable endpoint, the model to ask it for and the API to speak; prompts not
    fitted yet."""

    base_url: str
    model: str
    note: str = ""  # how an embedded server was started; "" for a remote target
    server: EmbeddedServer | None = field(default=None, repr=False)
    resolution: TargetResolution | None = None  # how model and API were chosen
    # How it is reached (TLS, HTTP/2, headers, the key's variable), for every later stage.
    access: TargetOptions = field(default_factory=TargetOptions, repr=False)

    @property
    def api(self) -> str | None:
        """The API the run speaks; None: the scenario's."""
        return None if self.resolution is None else self.resolution.api

    @property
    def host(self) -> str:
        return parse_base_url(self.base_url).host

    @property
    def port(self) -> int:
        return parse_base_url(self.base_url).port


@dataclass(frozen=True, kw_only=True)
class Target(Endpoint):
    """The endpoint with the scenario's prompts fitted to it."""

    dialect_config: DialectConfig  # model, API key and extra headers of every request
    scenario: Scenario  # the plan's, each class's prompt clamped to max_context
    max_context: int | None
    clamped: tuple[str, ...]  # one line per clamped class
    warnings: tuple[str, ...]  # clamping and calibration problems, as shown to the user
    calibration: Calibration | None  # None: prompts sized at one byte per token
    # The target's unloaded TTFT by prompt length, or why not (zqbench.target.at_rest)
    at_rest: AtRest | Unavailable = NOT_MEASURED
    capacity: Capacity | None = None  # as the target's /health states it; None: it does not

    def outcome_basis(self) -> OutcomeBasis:
        """How each request's outcome is judged: known before the load, so the [stop] rules
        judge by it live, and a killed run recovered from run-start.json judges alike."""
        return OutcomeBasis(
            rules=outcome_rules(self.scenario.outcomes),
            at_rest=self.at_rest,
            capacity=self.capacity,
        )


def outcome_rules(config: OutcomesConfig) -> OutcomeRules:
    """Each bound from the scenario's [outcomes], else zqbench's default."""
    d = DEFAULT_RULES
    probes = config.at_rest_probes
    return OutcomeRules(
        server_queue=d.server_queue if config.server_queue_s is None else config.server_queue_s,
        margin=d.margin if config.margin_s is None else config.margin_s,
        at_rest_probes=d.at_rest_probes if probes is None else probes,
    )


@contextlib.contextmanager
def open_endpoint(
    options: TargetOptions,
    server: ServerOptions,
    scenario: Scenario,
    out_dir: Path,
    *,
    on_note: NoteCallback | None = None,
) -> Iterator[Endpoint]:
    """The endpoint, reachable (or started), for the duration of the block."""
    note = on_note or (lambda _line: None)
    if options.target is not None:
        base_url = options.target.rstrip("/")
        resolution = _remote(base_url, options, scenario)
        endpoint = Endpoint(
            base_url, resolution.model, resolution=resolution.record, access=options
        )
        note(f"target {redact_url(endpoint.base_url)}: {resolution.record.describe()}")
        for line in resolution.notes:
            note(line)
        yield endpoint
        return
    with _embedded(options, server, scenario, out_dir) as endpoint:
        note(endpoint.note)
        yield endpoint


def embedded_server(options: ServerOptions, log_path: Path, *, pin_cpus: bool) -> EmbeddedServer:
    """The bundled reference server the options ask for (not started yet)."""
    return EmbeddedServer(
        engine=options.server_engine.value,
        scheduler=options.server_scheduler.value,
        extra_args=options.server_args,
        log_path=log_path,
        pin_cpus=pin_cpus,
        wrap=options.server_wrap,
        env=options.server_env,
    )


def _remote(base_url: str, options: TargetOptions, scenario: Scenario) -> Resolution:
    """The target checked reachable, its model and API resolved (zqbench.target.resolve)."""
    parse_base_url(base_url)  # one validation for every entry point (UsageError)
    check_reachable(base_url, insecure=options.insecure, http2=options.http2)
    named = None if options.api is None else options.api.api()
    access = Access(
        base_url,
        api_key=read_api_key(options.api_key_env),
        extra_headers=parse_headers(options.headers),
        insecure=options.insecure,
        timeout_s=min(scenario.request.timeout_s, RESOLVE_TIMEOUT_S),
        http2=options.http2,
    )
    wanted = Wanted(
        model=options.model,
        apis=() if named is None else (named.value,),
        prefer=scenario.api,
        strict_model=options.strict_model,
    )
    return resolve_target(access, wanted)


@contextlib.contextmanager
def _embedded(
    options: TargetOptions, server_options: ServerOptions, scenario: Scenario, out_dir: Path
) -> Iterator[Endpoint]:
    """The bundled reference server: its model from /health, the scenario's api."""
    log_path = out_dir / "reference_server.log"
    # Pinned: the model's compute must not steal the generator's timing.
    with embedded_server(server_options, log_path, pin_cpus=True) as server:
        health = server.health
        note = (
            f"embedded reference server at {server.base_url} "
            f"(engine={health.get('engine')}, scheduler={health.get('scheduler')})"
        )
        if health.get("engine") == "sim" and server_options.server_engine is ServerEngine.auto:
            # One line on why: a newcomer expects a model, and torch is one flag away.
            why = str(health.get("engine_why") or "the sim engine models a GPU server's steps")
            if why.startswith("torch is not installed"):
                note += f"; {why} (the [torch] extra runs the model)"
            else:
                note += f"; {why}; --server-engine torch runs the model on this CPU"
        model = options.model or str(health.get("model") or "refserver")
        named = options.api is not None and options.api.api() is not None
        resolution = TargetResolution(
            model=model,
            model_source="option" if options.model else "server",
            api=scenario.api,
            api_source="option" if named else "scenario",
            models=[],
            probes=[],
        )
        yield Endpoint(server.base_url, model, note, server, resolution, access=options)


def fit_target(
    endpoint: Endpoint, scenario: Scenario, *, on_note: NoteCallback | None = None
) -> Target:
    """Clamp the prompts to the target's context, then calibrate their sizes."""
    note = on_note or (lambda _line: None)
    options = endpoint.access
    if endpoint.api is not None:
        scenario = scenario.with_overrides(api=endpoint.api)
    health = _health(endpoint, options.insecure)
    max_context = options.max_context or _advertised_context(health)
    scenario, clamped = clamp_classes(scenario, max_context)
    for line in clamped:
        note(f"warning: {line}")
    dialect_config = DialectConfig(
        model=endpoint.model,
        api_key=read_api_key(options.api_key_env),
        extra_headers=parse_headers(options.headers),
    )
    calibration, problems = _calibrate(endpoint, scenario, dialect_config, max_context, options)
    for line in problems:
        note(f"warning: {line}")
    at_rest = _at_rest(endpoint, scenario, dialect_config, max_context, calibration, options)
    if isinstance(at_rest, Unavailable):
        note(f"warning: {at_rest.unavailable}; requests without timing headers are undetermined")
    return Target(
        **{f.name: getattr(endpoint, f.name) for f in dataclasses.fields(Endpoint)},
        dialect_config=dialect_config,
        scenario=scenario,
        max_context=max_context,
        clamped=tuple(clamped),
        warnings=(*clamped, *problems),
        calibration=calibration,
        at_rest=at_rest,
        capacity=_stated_capacity(endpoint, health, options.insecure),
    )


def _at_rest(
    endpoint: Endpoint,
    scenario: Scenario,
    dialect_config: DialectConfig,
    max_context: int | None,
    calibration: Calibration | None,
    options: TargetOptions,
) -> AtRest | Unavailable:
    """The target's TTFT alone, before the load, at the scenario's prompt sizes."""
    per_size = scenario.outcomes.at_rest_probes
    class_sizes = [c.prompt_tokens for c in scenario.request.mix]
    sizes = probe_sizes(class_sizes, max_context)
    return measure_at_rest(
        endpoint.base_url,
        scenario.api,
        dialect_config,
        sizes,
        DEFAULT_AT_REST_PROBES if per_size is None else per_size,
        calibration=calibration,
        optional_above=max(class_sizes),
        insecure=options.insecure,
        http2=options.http2,
        timeout_s=min(scenario.request.timeout_s, CALIBRATION_TIMEOUT_S),
    )


def _health(endpoint: Endpoint, insecure: bool) -> dict[str, Any] | None:
    """The target's /health JSON object (the reference server's was read at its start)."""
    if endpoint.server is not None:
        return dict(endpoint.server.health)
    with contextlib.suppress(Exception):  # any endpoint may lack /health or answer oddly
        return dict(get_health(endpoint.base_url, timeout_s=2.0, insecure=insecure))
    return None


def _stated_capacity(
    endpoint: Endpoint, health: dict[str, Any] | None, insecure: bool
) -> Capacity | None:
    """The capacity the target states (zqbench.target.capacity.STATEMENTS), /health's
    already read; the reference server's is in its /health, so nothing more is asked."""

    def get_json(path: str, timeout_s: float) -> Any:
        if endpoint.server is not None:
            return None
        return control.get_json(endpoint.base_url + path, insecure=insecure, timeout_s=timeout_s)

    return first_stated(get_json, health or {})


def _advertised_context(health: dict[str, Any] | None) -> int | None:
    """max_context from the target's /health (the reference server has it), if any."""
    value = (health or {}).get("max_context")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else None


def clamp_classes(scenario: Scenario, max_context: int | None) -> tuple[Scenario, list[str]]:
    """Shrink the prompt of every class whose prompt + max_tokens exceeds `max_context`.

    Returns the scenario with the new sizes and one warning line per clamped class."""
    if max_context is None:
        return scenario, []
    warnings: list[str] = []
    classes = []
    for cls in scenario.request.mix:
        max_tokens = scenario.request.max_tokens_for(cls)
        room = max_context - max_tokens
        if cls.prompt_tokens + max_tokens <= max_context:
            classes.append(cls)
            continue
        if room < 2:
            raise UsageError(
                f"class {cls.name}: max_tokens {max_tokens} leaves no room for a prompt "
                f"within max context {max_context}"
            )
        tokens = max(2, int(room * CONTEXT_HEADROOM))
        warnings.append(
            f"class {cls.name}: prompt_tokens {cls.prompt_tokens} + max_tokens {max_tokens} "
            f"> max context {max_context}; clamped to {tokens} prompt tokens"
        )
        classes.append(dataclasses.replace(cls, prompt_tokens=tokens))
    request = dataclasses.replace(scenario.request, mix=tuple(classes))
    return dataclasses.replace(scenario, request=request), warnings


def _calibrate(
    endpoint: Endpoint,
    scenario: Scenario,
    dialect_config: DialectConfig,
    max_context: int | None,
    options: TargetOptions,
) -> tuple[Calibration | None, tuple[str, ...]]:
    """The bytes-per-token fit, or None and the reason it is missing."""
    if options.calibration is CalibrationMode.off:
        return None, ()
    try:
        return calibrate(
            endpoint.base_url,
            scenario.api,
            dialect_config,
            max_context=max_context,
            insecure=options.insecure,
            http2=options.http2,
            timeout_s=min(scenario.request.timeout_s, CALIBRATION_TIMEOUT_S),
            deadline_s=CALIBRATION_DEADLINE_S,
            # The embedded server lives on a new port each run: nothing to reuse.
            use_cache=options.calibration is CalibrationMode.auto and endpoint.server is None,
        ), ()
    except TargetError as exc:
        # The run can still measure; its prompts are then sized at one byte per token,
        # and the tokens each request really had are recorded anyway.
        return None, (f"{exc.message}; prompts sized at one byte per token",)
