"""Stage 3, execute: the plan's works on the target's workers -> `Execution`.

The hooks (impairment, telemetry) are built by `pipeline.hooks.build_hooks` before any
request reaches the target, so a missing permission or a bad source fails before the load;
they start at the schedule's t = 0 and are stopped on every way out (end, error, Ctrl-C,
SIGTERM), together (`hooks.running.RunningHooks`).
Signals are the caller's (`run_scenario` holds the process's one scope): a SIGTERM right
after the load must not leave nftables rules in place.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zqbench.distributed.auth import read_secret
from zqbench.distributed.master import Master, MasterSettings
from zqbench.distributed.outcome import DistributedOutcome
from zqbench.engines import follow_up
from zqbench.engines.follow_up import FollowUpSpec
from zqbench.engines.live import ProgressCallback, tee
from zqbench.engines.native import WorkerSpec
from zqbench.engines.workers import StopFlag, run_workers
from zqbench.errors import UsageError
from zqbench.hooks.contract import HookContext, HookResult, RunHook
from zqbench.hooks.running import RunningHooks
from zqbench.load.arrival_rate import MAX_PLANNED_REQUESTS, too_many
from zqbench.pipeline.options import ConnectionOptions, DistributedOptions
from zqbench.pipeline.plan import Plan
from zqbench.pipeline.stopping import StopWatch
from zqbench.pipeline.target import Target
from zqbench.redact import redact_url
from zqbench.samples.writer import stream_path
from zqbench.scenario import Scenario
from zqbench.sources import RequestSource, fit_source
from zqbench.stop.ended import EndedAt
from zqbench.summary import Stop
from zqbench.transport.base import PoolLimits


@dataclass(frozen=True)
class Execution:
    start_ns: int  # t = 0 of every t_* column, on time.perf_counter_ns()
    start_epoch_ns: int  # the same instant on the wall clock
    end_ns: int  # when the workers were done, on time.perf_counter_ns()
    interrupted: bool  # a signal or the caller's stop flag ended the load early
    hooks: HookResult  # what the hooks add to the summary
    prompt_bytes: dict[str, int]  # bytes of synthetic prompt text per request class
    request_source: dict[str, Any]  # what the request source says of itself (its describe())
    sample_files: tuple[Path, ...]  # each worker's Arrow stream (a lost worker's may be absent)
    distributed: DistributedOutcome | None = None  # the workers of a --distributed run
    stop: Stop | None = None  # what the scenario's [stop] rules ended; None: it has none
    # The requests sent when a worker reached its share of the row bound (a closed loop
    # stopped before its end); None: no worker did
    stopped_at_bound: int | None = None


def execute(
    plan: Plan,
    target: Target,
    hooks: list[RunHook],
    out_dir: Path,
    *,
    seed: int,
    connection: ConnectionOptions,
    distribution: DistributedOptions,
    on_progress: ProgressCallback | None = None,
    stop: StopFlag | None = None,
    live_counts: bool = False,
    on_note: Callable[[str], None] | None = None,
) -> Execution:
    """Send the plan's requests; samples land in `out_dir` as the workers go. `seed` draws
    what each request asks (the request source's); `live_counts` has every worker count its
    samples into its progress, for the live exposition; `on_note` hears a [stop] rule trip."""
    run_hooks = RunningHooks(
        hooks,
        HookContext(
            run_name=out_dir.name,
            out_dir=out_dir,
            base_url=redact_url(target.base_url),
            host=target.host,
            port=target.port,
            start_monotonic_ns=0,  # set at t = 0
            stages=plan.stages,
        ),
    )
    source = fit_source(target.scenario, seed, target.calibration)
    watch = _stop_watch(plan, target, on_note)
    specs = _worker_specs(connection, len(plan.works), target, source, out_dir, live_counts)
    on_start: Callable[[int], None] = run_hooks.start
    if watch is not None:
        specs = [dataclasses.replace(spec, watched=True) for spec in specs]
        on_progress = tee(watch.observe, on_progress)
        on_start = tee(watch.start, run_hooks.start)
    sent: dict[int, int] = {}  # each worker's sends, from its progress (the last at its end)
    on_progress = tee(lambda p: sent.update((w.worker, w.sent) for w in p.per_worker), on_progress)
    start_epoch_ns = time.time_ns()
    start_mono_ns = time.perf_counter_ns()
    stop = stop or StopFlag()
    master = _master(distribution, out_dir, target.access.api_key_env)
    try:
        if master is None:
            start_ns, interrupted = run_workers(
                specs,
                plan.works,
                on_progress=on_progress,
                stop=stop,
                on_start=on_start,
                ended=None if watch is None else watch.ended,
            )
        else:
            start_ns, interrupted = master.run(
                specs, plan.works, on_progress=on_progress, stop=stop, on_start=on_start
            )
    finally:
        hook_results = run_hooks.stop()
    interrupted = interrupted or stop.is_set()
    end_ns = time.perf_counter_ns()
    stopped_at_bound = _at_bound(specs, sent, on_note)
    distributed = None
    if master is not None:
        distributed = master.outcome(offered=plan.offered, duration_s=(end_ns - start_ns) / 1e9)
    return Execution(
        start_ns=start_ns,
        # One anchor on both clocks, at the run's start (the monotonic origin of every t_*).
        start_epoch_ns=start_epoch_ns + start_ns - start_mono_ns,
        end_ns=end_ns,
        interrupted=interrupted,
        hooks=hook_results,
        prompt_bytes=source.prompt_bytes(),
        request_source=source.describe(),
        sample_files=tuple(stream_path(out_dir, spec.worker) for spec in specs),
        distributed=distributed,
        stop=None if watch is None else watch.record(plan.works),
        stopped_at_bound=stopped_at_bound,
    )


def check_distribution(scenario: Scenario, distribution: DistributedOptions) -> None:
    """What only this machine's workers can do, refused for a --distributed run. The run
    calls it right after the plan, before the target is contacted (exit 2, no traffic)."""
    if not distribution.distributed:
        return
    if scenario.outcomes.retry_after_follow_ups:
        raise UsageError(
            "[outcomes] retry_after_follow_ups runs on this machine's workers only: "
            "remove it for a --distributed run"
        )
    if scenario.stop.rules():
        raise UsageError(
            "[stop] rules watch this machine's workers only: "
            "remove the [stop] table for a --distributed run"
        )


def _stop_watch(
    plan: Plan, target: Target, on_note: Callable[[str], None] | None
) -> StopWatch | None:
    """The [stop] rules' watcher, with the workers' shared word of what it ended."""
    config = target.scenario.stop
    if not config.rules():
        return None
    ended = EndedAt(len(plan.stages), shared=len(plan.works) > 1)
    return StopWatch(config, plan.stages, target.outcome_basis(), ended, on_note)


def _master(options: DistributedOptions, out_dir: Path, api_key_env: str | None) -> Master | None:
    """A --distributed run's Locust master, listening before anything else starts."""
    if not options.distributed:
        return None
    settings = MasterSettings(
        secret=read_secret(options.secret_env),
        bind=options.master_bind,
        expect_workers=options.expect_workers,
        wait_s=options.worker_wait_s,
        max_lost_share=options.max_lost_share,
        api_key_env=api_key_env,
    )
    return Master(settings, out_dir)


def _worker_specs(
    options: ConnectionOptions,
    n_workers: int,
    target: Target,
    source: RequestSource,
    out_dir: Path,
    live_counts: bool,
) -> list[WorkerSpec]:
    scenario = target.scenario
    limits = PoolLimits(
        max_connections=options.max_connections,
        warm_connections=_warm_connections(options, scenario, target.access.http2),
        reuse_connections=not scenario.request.cold_connections,
    )
    return [
        WorkerSpec(
            worker=w,
            n_workers=n_workers,
            base_url=target.base_url,
            http2=target.access.http2,
            limits=limits,
            api=scenario.api,
            dialect_config=target.dialect_config,
            source=source,
            timeout_s=scenario.request.timeout_s,
            out_dir=str(out_dir),
            spin_ns=options.spin_us * 1000,
            insecure=target.access.insecure,
            h1_client=options.h1_client.value,
            drain_timeout_s=scenario.load.graceful_stop_s,
            cold_connections=scenario.request.cold_connections,
            live_counts=live_counts,
            follow_ups=_follow_ups(scenario, w, n_workers),
            max_sends=max_sends(n_workers),
        )
        for w in range(n_workers)
    ]


def max_sends(n_workers: int) -> int:
    """One worker's share of the rows a run's analysis holds (MAX_PLANNED_REQUESTS): never
    reached by a plan counted beforehand (each worker's share of it is at most this), only
    by a closed loop, which has no plan to count (#44: 4,500,000 rows passed 2 GiB)."""
    return -(-MAX_PLANNED_REQUESTS // n_workers)


def _at_bound(
    specs: list[WorkerSpec], sent: dict[int, int], on_note: Callable[[str], None] | None
) -> int | None:
    """The requests sent when a worker stopped at its bound (the run ended before its
    duration, and says so); None: none did."""
    bounds = {s.worker: s.max_sends for s in specs if s.max_sends is not None}
    if not any(sent.get(w, 0) >= bound for w, bound in bounds.items()):
        return None
    total = sum(sent.values())
    if on_note is not None:
        on_note(
            f"the load stopped at {total:,} requests, before its end: "
            f"{too_many(MAX_PLANNED_REQUESTS)}give it a shorter duration, or fewer users"
        )
    return total


def _follow_ups(scenario: Scenario, worker: int, n_workers: int) -> FollowUpSpec | None:
    """Worker `worker`'s share of the refusals to follow at their Retry-After; None: off."""
    o = scenario.outcomes
    if not o.retry_after_follow_ups:
        return None
    budget = follow_up.share(o.retry_after_follow_ups, worker, n_workers)
    return FollowUpSpec(budget=budget, attempts=o.retry_after_attempts)


def _warm_connections(options: ConnectionOptions, scenario: Scenario, http2: bool) -> int:
    """Connections opened before t = 0: given, or sized from the expected concurrency."""
    if scenario.request.cold_connections:
        return 0  # every request opens its own: one opened early would be warm
    if options.warm_connections is not None:
        return max(0, min(options.warm_connections, options.max_connections))
    if http2:
        return 1
    guess = scenario.load.concurrency_guess()
    return max(1, min(guess, 64, options.max_connections))
