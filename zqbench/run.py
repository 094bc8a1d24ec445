"""`run_scenario`: the library API behind `zqbench run`.

scenario -> schedule -> workers (engine) -> samples on disk -> summary -> outputs.
The CLI parses flags into `RunOptions` and calls this; tests call it directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow.parquet as pq

import zqbench
from zqbench import recorder
from zqbench.calibrate import Calibration, calibrate
from zqbench.dialects import DIALECTS
from zqbench.dialects.base import DialectConfig
from zqbench.embedded import EmbeddedServer, get_health
from zqbench.engines.native import ClassSpec, ClosedLoopWork, OpenLoopWork, WorkerSpec
from zqbench.engines.workers import (
    StopFlag,
    Work,
    run_in_process,
    run_in_processes,
    stop_on_signals,
)
from zqbench.errors import EXIT_INTERRUPTED, TargetError, UsageError, exit_code_for_verdict
from zqbench.hooks import HookContext, HookResult, RunHook
from zqbench.load.closed_loop import vu_plan
from zqbench.load.mix import assign_classes
from zqbench.load.open_loop import arrival_times
from zqbench.metrics.slo import parse_slo
from zqbench.metrics.summary import RunInfo, summarize
from zqbench.outputs.json_out import write_summary
from zqbench.outputs.junit import write_junit
from zqbench.outputs.markdown import write_summary_md
from zqbench.outputs.paths import make_out_dir
from zqbench.prompts import synth_text
from zqbench.redact import redact_url
from zqbench.reporting.render import render_html
from zqbench.run_hooks import hooks_for_run
from zqbench.scenario import LoadConfig, Scenario, load_scenario
from zqbench.stages import StageInfo
from zqbench.transport.base import PoolLimits
from zqbench.transport.factory import H1_CLIENTS
from zqbench.transport.origin import parse_base_url

ProgressCallback = Callable[[dict[str, Any]], None]

OPEN_LOOP = ("constant-arrival-rate", "ramping-arrival-rate")


@dataclass(frozen=True, slots=True)
class RunOptions:
    scenario: str | Scenario = "burst"  # a bundled name, a TOML path, or a loaded scenario
    target: str | None = None  # None: start the bundled reference server
    api: str | None = None  # overrides the scenario's
    model: str | None = None
    headers: tuple[str, ...] = ()  # "Name: value"
    api_key_env: str | None = None  # the key is read from this variable, never from argv
    http2: bool = False
    h1_client: str = "raw"  # HTTP/1.1 transport: raw (measured fastest) or aiohttp
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
    max_tokens: int | None = None
    insecure: bool = False
    spin_us: int = 1500
    inconclusive_fails: bool = True
    # The embedded reference server (used when target is None).
    server_engine: str = "auto"
    server_scheduler: str = "zero-queue"
    server_args: tuple[str, ...] = ()
    # Prompt sizing (zqbench.calibrate): "auto" (cached per target), "fresh" (probe again),
    # "off" (one byte per token, exact only on the reference server).
    calibration: str = "auto"
    max_context: int | None = None  # clamp classes to it; None: the target's /health says
    html: bool = True  # render report.html (a sweep may skip it for its steps)
    telemetry: tuple[str, ...] = ()  # --telemetry sources: nvml, auto, prometheus:URL
    hooks: tuple[RunHook, ...] = ()  # impairment, telemetry, ...: started at t = 0, always stopped


@dataclass(frozen=True, slots=True)
class RunResult:
    out_dir: Path
    summary: dict[str, Any]
    exit_code: int
    interrupted: bool
    target_note: str = ""


@dataclass
class _Target:
    base_url: str
    model: str
    note: str = ""
    server: EmbeddedServer | None = field(default=None, repr=False)


def _parse_headers(raw: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    parsed = []
    for item in raw:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {item!r} is not 'Name: value'")
        parsed.append((name.strip(), value.strip()))
    return tuple(parsed)


def _api_key(env_var: str | None) -> str | None:
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise UsageError(f"--api-key-env {env_var}: the variable is not set or empty")
    return value


def _check_target_url(url: str) -> str:
    parse_base_url(url)  # one validation for every entry point; raises a one-line UsageError
    return url.rstrip("/")


def _check_reachable(base_url: str, timeout_s: float = 5.0) -> None:
    """Fail fast (exit 3) with the address, before any worker starts."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError | socket.timeout):
            reason = f"no answer within {timeout_s:.0f} s"
        raise TargetError(f"cannot reach {host}:{port}: {reason}") from None


@contextlib.contextmanager
def _target(options: RunOptions, out_dir: Path) -> Iterator[_Target]:
    if options.target is not None:
        base_url = _check_target_url(options.target)
        _check_reachable(base_url)
        if not options.model:
            raise UsageError("--model is required with --target (the model name the server serves)")
        yield _Target(base_url, options.model)
        return
    server = EmbeddedServer(
        engine=options.server_engine,
        scheduler=options.server_scheduler,
        extra_args=options.server_args,
        log_path=out_dir / "reference_server.log",
        pin_cpus=True,  # the model's compute must not steal the generator's timing
    )
    with server:
        health = server.health
        note = (
            f"embedded reference server at {server.base_url} "
            f"(engine={health.get('engine')}, scheduler={health.get('scheduler')})"
        )
        model = options.model or str(health.get("model") or "refserver")
        yield _Target(server.base_url, model, note, server)


CALIBRATION_MODES = ("auto", "fresh", "off")
CALIBRATION_TIMEOUT_S = 10.0  # per probe: calibration must never stall a run for long
CONTEXT_HEADROOM = 0.98  # a clamped prompt keeps 2% spare: calibration is good to about 2%


def _advertised_context(target: _Target) -> int | None:
    """max_context from the target's /health (the reference server has it), if any."""
    health: dict[str, Any] | None = None
    if target.server is not None:
        health = dict(target.server.health)
    else:
        with contextlib.suppress(Exception):  # any endpoint may lack /health or answer oddly
            health = dict(get_health(target.base_url, timeout_s=2.0))
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


def _class_specs(
    scenario: Scenario, seed: int, calibration: Calibration | None
) -> tuple[ClassSpec, ...]:
    specs = []
    for i, cls in enumerate(scenario.request.mix):
        tokens = max(2, int(cls.prompt_tokens))  # at least one byte of text after BOS
        n_bytes = tokens - 1 if calibration is None else calibration.bytes_for(tokens)
        specs.append(
            ClassSpec(
                name=cls.name,
                prompt=synth_text(n_bytes, seed=seed * 1000 + i),
                max_tokens=scenario.request.max_tokens_for(cls),
                prompt_tokens_estimate=tokens,
            )
        )
    return tuple(specs)


def _warm_connections(options: RunOptions, scenario: Scenario) -> int:
    if options.warm_connections is not None:
        return max(0, min(options.warm_connections, options.max_connections))
    if options.http2:
        return 1
    load = scenario.load
    if load.executor in OPEN_LOOP:
        peak = max([load.start_rate or 0.0, load.rate or 0.0, *[s.target for s in load.stages]])
        # Little's law with a guessed 100 ms latency, bounded: enough for the first second.
        guess = int(peak * 0.1) + 4
    else:
        guess = max([load.vus or 0, *[int(s.target) for s in load.stages]])
    return max(1, min(guess, 64, options.max_connections))


def _stage_name(load: LoadConfig, index: int) -> str:
    return load.stages[index].name or f"stage {index}"


def _works(
    scenario: Scenario, options: RunOptions
) -> tuple[list[Work], int, float, list[StageInfo]]:
    """The schedule split across workers; also the offered count, offered rate and stages."""
    load = scenario.load
    mix = scenario.request.mix
    if load.executor in OPEN_LOOP:
        schedule = arrival_times(load, options.seed)
        classes = assign_classes(
            mix,
            schedule.offered,
            options.seed,
            stage=schedule.stage,
            stage_mixes=[s.mix for s in load.stages],
        )
        works: list[Work] = [
            OpenLoopWork(
                request_ids=part.request_ids,
                times_ns=part.times_ns,
                stages=part.stage,
                classes=classes[part.request_ids].astype(np.int32),
            )
            for part in schedule.split(options.workers)
        ]
        duration_s = schedule.duration_ns / 1e9
        stages = [
            StageInfo(
                _stage_name(load, i), a / 1e9, b / 1e9, load.stages[i].target, load.stages[i].mix
            )
            for i, (a, b) in enumerate(schedule.stage_bounds_ns)
        ]
        rate = schedule.offered / duration_s if duration_s else 0.0
        return works, schedule.offered, rate, stages
    plan = vu_plan(load)
    works = [ClosedLoopWork(plan=plan, mix=mix, seed=options.seed) for _ in range(options.workers)]
    bounds = plan.bounds_ns
    stages = [
        StageInfo(_stage_name(load, i), bounds[i] / 1e9, bounds[i + 1] / 1e9)
        for i in range(len(bounds) - 1)
    ]
    return works, 0, 0.0, stages


def _environment(options: RunOptions, target: _Target) -> dict[str, Any]:
    env: dict[str, Any] = {
        "zqbench": zqbench.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "hostname": socket.gethostname(),
        "workers": options.workers,
        "http2": options.http2,
        "seed": options.seed,
        "rate_scale": options.rate_scale,
        "duration_scale": options.duration_scale,
    }
    if target.server is not None:
        env["reference_server"] = {
            k: target.server.health.get(k) for k in ("engine", "scheduler", "device", "model")
        }
    return env


def prepare_scenario(options: RunOptions) -> Scenario:
    """Load, scale and override the scenario; validate the flags that depend on it."""
    if options.h1_client not in H1_CLIENTS:
        raise UsageError(
            f"--h1-client {options.h1_client!r}: choose one of {', '.join(H1_CLIENTS)}"
        )
    if options.workers < 1:
        raise UsageError(f"--workers {options.workers}: must be at least 1")
    if options.calibration not in CALIBRATION_MODES:
        raise UsageError(
            f"--calibration {options.calibration}: choose one of {', '.join(CALIBRATION_MODES)}"
        )
    if options.max_context is not None and options.max_context < 2:
        raise UsageError(f"--max-context {options.max_context}: must be at least 2 tokens")
    if options.rate_scale <= 0 or options.duration_scale <= 0:
        raise UsageError("--rate-scale and --duration-scale must be greater than 0")
    loaded = options.scenario
    if not isinstance(loaded, Scenario):
        loaded = load_scenario(loaded)
    scenario = loaded.scaled(rate_scale=options.rate_scale, duration_scale=options.duration_scale)
    api = options.api or scenario.api
    if api not in DIALECTS:
        raise UsageError(f"--api {api!r}: choose one of {', '.join(DIALECTS)}")
    scenario = scenario.with_overrides(
        api=api, max_tokens=options.max_tokens, timeout_s=options.timeout_s
    )
    for expr in (*scenario.slo, *options.slos):
        parse_slo(expr)  # a bad expression fails before any traffic (exit 2)
    return scenario


def _stop_hooks(started: list[RunHook]) -> HookResult:
    """Stop every started hook, newest first, even when one of them fails to stop."""
    merged = HookResult()
    errors: list[str] = []
    for hook in reversed(started):
        try:
            result = hook.stop()
        except Exception as exc:  # keep stopping the others; report, never hide
            errors.append(f"{hook.name}: {type(exc).__name__}: {exc}")
            continue
        merged.telemetry.update(result.telemetry)
        if result.environment:
            merged.environment[hook.name] = result.environment
        merged.notes.extend(result.notes)
    if errors:
        merged.notes.extend(f"hook failed to stop: {e}" for e in errors)
    if merged.notes:
        merged.environment["notes"] = merged.notes
    return merged


def write_outputs(out_dir: Path, summary: dict[str, Any], *, inconclusive_fails: bool) -> None:
    """summary.json, summary.md and junit.xml; samples.parquet is already in place."""
    write_summary(summary, out_dir / "summary.json")
    write_summary_md(summary, out_dir / "summary.md")
    write_junit(
        summary,
        out_dir / "junit.xml",
        inconclusive_as="failure" if inconclusive_fails else "skipped",
    )


def run_scenario(
    options: RunOptions,
    *,
    on_progress: ProgressCallback | None = None,
    on_target: Callable[[str], None] | None = None,
    stop: StopFlag | None = None,
) -> RunResult:
    scenario = prepare_scenario(options)
    headers = _parse_headers(options.headers)
    api_key = _api_key(options.api_key_env)
    started_at = datetime.now(timezone.utc)
    out_dir = make_out_dir(options.out, scenario.name, now=started_at, root=options.reports_root)

    with _target(options, out_dir) as target:
        if on_target is not None:
            on_target(target.note or f"target {redact_url(target.base_url)}")
        target_parts = urlsplit(target.base_url)
        target_port = target_parts.port or (443 if target_parts.scheme == "https" else 80)
        # Built before any traffic: impairment preflight and telemetry sources fail here.
        hooks: list[RunHook] = [
            *hooks_for_run(
                scenario,
                telemetry=options.telemetry,
                target_host=target_parts.hostname or "",
                target_port=target_port,
            ),
            *options.hooks,
        ]
        max_context = options.max_context or _advertised_context(target)
        scenario, clamp_warnings = clamp_classes(scenario, max_context)
        for line in clamp_warnings:
            if on_target is not None:
                on_target(f"warning: {line}")
        calibration = None
        warnings = list(clamp_warnings)
        if options.calibration != "off":
            try:
                calibration = calibrate(
                    target.base_url,
                    scenario.api,
                    DialectConfig(model=target.model, api_key=api_key, extra_headers=headers),
                    max_context=max_context,
                    insecure=options.insecure,
                    timeout_s=min(scenario.request.timeout_s, CALIBRATION_TIMEOUT_S),
                    # The embedded server lives on a new port each run: nothing to reuse.
                    use_cache=options.calibration == "auto" and target.server is None,
                )
            except TargetError as exc:
                # The run can still measure; its prompts are then sized at one byte per
                # token, and the tokens each request really had are recorded anyway.
                warnings.append(f"{exc.message}; prompts sized at one byte per token")
                if on_target is not None:
                    on_target(f"warning: {warnings[-1]}")
        classes = _class_specs(scenario, options.seed, calibration)
        works, offered, offered_rate, stages = _works(scenario, options)
        limits = PoolLimits(
            max_connections=options.max_connections,
            warm_connections=_warm_connections(options, scenario),
        )
        dialect_config = DialectConfig(model=target.model, api_key=api_key, extra_headers=headers)
        specs = [
            WorkerSpec(
                worker=w,
                n_workers=options.workers,
                base_url=target.base_url,
                http2=options.http2,
                limits=limits,
                api=scenario.api,
                dialect_config=dialect_config,
                classes=classes,
                stream=scenario.request.stream,
                timeout_s=scenario.request.timeout_s,
                out_dir=str(out_dir),
                spin_ns=options.spin_us * 1000,
                insecure=options.insecure,
                h1_client=options.h1_client,
                drain_timeout_s=scenario.load.graceful_stop_s,
            )
            for w in range(options.workers)
        ]
        started: list[RunHook] = []

        def on_start(start_ns: int) -> None:
            ctx = HookContext(
                run_name=out_dir.name,
                out_dir=out_dir,
                base_url=redact_url(target.base_url),
                host=target_parts.hostname or "",
                port=target_port,
                start_monotonic_ns=start_ns,
                stages=stages,
            )
            for hook in hooks:
                started.append(hook)  # before start(): a half-started hook is still stopped
                hook.start(ctx)

        start_epoch_ns = time.time_ns()
        start_mono_ns = time.perf_counter_ns()
        stop = stop or StopFlag()
        # Signals stay handled until the hooks are undone: a SIGTERM right after the load
        # must not kill the process with nftables rules still in place.
        with stop_on_signals(stop):
            try:
                if options.workers == 1:
                    start_ns, interrupted = run_in_process(
                        specs[0], works[0], on_progress=on_progress, stop=stop, on_start=on_start
                    )
                else:
                    start_ns, interrupted = run_in_processes(
                        specs, works, on_progress=on_progress, stop=stop, on_start=on_start
                    )
            finally:
                hook_results = _stop_hooks(started)
            interrupted = interrupted or stop.is_set()
        end_ns = time.perf_counter_ns()
        # One anchor on both clocks, at the run's start (the monotonic origin of every t_*).
        start_epoch_ns += start_ns - start_mono_ns
        env = _environment(options, target)
        env["prompts"] = {
            "max_context": max_context,
            "clamped": clamp_warnings,
            "warnings": warnings,
            "calibration": None if calibration is None else dataclasses.asdict(calibration),
            "bytes": {c.name: len(c.prompt) for c in classes},
        }

    clock = {"start_monotonic_ns": start_ns, "start_epoch_ns": start_epoch_ns}
    recorder.finalize(out_dir, {"zqbench.clock." + k: str(v) for k, v in clock.items()})
    samples = pq.read_table(out_dir / recorder.PARQUET_NAME).to_pandas()
    run_info = RunInfo(
        scenario=scenario.name,
        target=redact_url(target.base_url),
        api=scenario.api,
        started_at=started_at.isoformat(timespec="seconds"),
        start_monotonic_ns=start_ns,
        start_epoch_ns=start_epoch_ns,
        duration_s=(end_ns - start_ns) / 1e9,
        open_loop=scenario.load.executor in OPEN_LOOP,
        scenario_config=scenario.to_dict(),
        offered_requests=offered or None,
        offered_rate=offered_rate or None,
        environment={**env, "interrupted": interrupted, **hook_results.environment},
        stages=stages,
        telemetry=hook_results.telemetry,
    )
    summary = summarize(samples, run=run_info, slos=[*scenario.slo, *options.slos])
    write_outputs(out_dir, summary, inconclusive_fails=options.inconclusive_fails)
    if options.html:
        render_html(out_dir, summary, samples)
    if interrupted:
        code = EXIT_INTERRUPTED
    else:
        code = exit_code_for_verdict(
            str(summary["verdict"]), inconclusive_fails=options.inconclusive_fails
        )
    return RunResult(out_dir, summary, code, interrupted, target.note)
