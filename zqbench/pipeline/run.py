"""`run_scenario`: the library API behind `zqbench run`.

    plan -> target -> execute -> analyze -> write   (zqbench.pipeline, a module each)

The target stage is two steps, `open_endpoint` and `fit_target`, so that the hooks
(impairment preflight, telemetry sources) are built after the target is known and before
any request reaches it.

The CLI parses flags into `RunOptions` and calls this; tests call it directly.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zqbench.engines.live import ProgressCallback, tee
from zqbench.engines.workers import StopFlag, stop_on_signals
from zqbench.errors import EXIT_INTERRUPTED, UsageError, exit_code_for_verdict
from zqbench.exporter import DEFAULT_HOST, MetricsEndpoint
from zqbench.exporter.collector import RunLabels
from zqbench.hooks.contract import RunHook
from zqbench.outputs.paths import existing_ancestor, make_out_dir, removed_if_empty_on_error
from zqbench.outputs.start_record import StartRecord
from zqbench.pipeline.analyze import analyze, start_info
from zqbench.pipeline.execute import check_distribution, execute
from zqbench.pipeline.hooks import build_hooks
from zqbench.pipeline.options import RunOptions
from zqbench.pipeline.plan import Plan, make_plan
from zqbench.pipeline.target import Endpoint, fit_target, open_endpoint
from zqbench.pipeline.write import write_outputs
from zqbench.redact import redact_url
from zqbench.summary import Summary
from zqbench.telemetry.prometheus import PrometheusScraper

__all__ = ["RunOptions", "RunResult", "run_scenario"]


@dataclass(frozen=True, slots=True)
class RunResult:
    out_dir: Path
    summary: Summary
    exit_code: int
    interrupted: bool


def run_scenario(
    options: RunOptions,
    *,
    on_progress: ProgressCallback | None = None,
    on_target: Callable[[str], None] | None = None,
    stop: StopFlag | None = None,
) -> RunResult:
    """One run: its outputs in a new folder, its verdict as an exit code.

    `on_target` gets one-line notes (the target, clamped prompts, calibration problems);
    `stop`, once set, ends the load early, as Ctrl-C does (exit code 130). From the load's
    start to the last output, SIGINT and SIGTERM only set `stop`: a second signal never
    cuts the outputs short. A run that fails before it wrote anything leaves no folder."""
    plan = make_plan(options.plan, options.endpoint)
    check_distribution(plan.scenario, options.distribution)  # before any traffic
    stop = stop or StopFlag()
    out = options.output
    kept = existing_ancestor(Path(out.out) if out.out else out.reports_root)
    out_dir = make_out_dir(out.out, plan.scenario.name, now=plan.started_at, root=out.reports_root)
    with removed_if_empty_on_error(out_dir, kept), contextlib.ExitStack() as signals:
        # Bound before the target is contacted (a port in use is exit 2 before any load);
        # served until the outputs are written, so the last scrapes see the final counts.
        live = _metrics_endpoint(options, plan, out_dir, on_target)
        if live is not None:
            signals.enter_context(live)
            on_progress = tee(live.observe, on_progress)
        opened = open_endpoint(
            options.endpoint, options.server, plan.scenario, out_dir, on_note=on_target
        )
        with opened as endpoint:
            hooks = build_hooks(options.beside, plan.scenario, endpoint, on_note=on_target)
            if live is not None:
                _watch(live, endpoint, hooks)
            target = fit_target(endpoint, plan.scenario, on_note=on_target)
            # run-start.json, written at t = 0: a killed run can be recovered from it.
            info = functools.partial(start_info, options.plan, options.validity, plan, target)
            hooks.append(StartRecord(out_dir, info, plan.slos))
            signals.enter_context(stop_on_signals(stop))
            execution = execute(
                plan,
                target,
                hooks,
                out_dir,
                seed=options.plan.seed,
                connection=options.connection,
                distribution=options.distribution,
                on_progress=on_progress,
                stop=stop,
                live_counts=live is not None,
                on_note=on_target,
            )
        with _disk_errors(out_dir):
            analysis = analyze(options.plan, options.validity, plan, target, execution, out_dir)
            write_outputs(
                out_dir,
                analysis.summary,
                analysis.frame,
                inconclusive_fails=out.inconclusive_fails,
                html=out.html,
            )
    interrupted = execution.interrupted or stop.is_set()
    code = EXIT_INTERRUPTED
    if not interrupted:
        code = exit_code_for_verdict(
            analysis.summary.verdict, inconclusive_fails=out.inconclusive_fails
        )
    return RunResult(out_dir, analysis.summary, code, interrupted)


def _metrics_endpoint(
    options: RunOptions, plan: Plan, out_dir: Path, on_note: Callable[[str], None] | None
) -> MetricsEndpoint | None:
    """--metrics-port (or the scenario's [metrics]): the exposition, bound now; None: none."""
    config = plan.scenario.metrics
    port = options.beside.metrics_port
    if port is None and config is not None:
        port = config.port
    if port is None:
        return None
    host = options.beside.metrics_host or (config.host if config else None) or DEFAULT_HOST
    labels = RunLabels(
        scenario=plan.scenario.name,
        run=out_dir.name,
        stage_names=tuple(stage.name for stage in plan.stages),
        slos=plan.slo_checks,
    )
    live = MetricsEndpoint(host, port, labels)
    if on_note is not None:
        on_note(f"metrics: serving the run so far at {live.url}")
    return live


def _watch(live: MetricsEndpoint, endpoint: Endpoint, hooks: list[RunHook]) -> None:
    """The exposition names the target, and re-exports the scraped server's queue."""
    live.state.target = redact_url(endpoint.base_url)
    scrapers = [h for h in hooks if isinstance(h, PrometheusScraper)]
    scrapers.sort(key=lambda h: h.engine is None)  # the target's engine's own first
    if scrapers:
        live.watch_server(scrapers[0].latest)


@contextlib.contextmanager
def _disk_errors(out_dir: Path) -> Iterator[None]:
    """A full disk or a folder that became unwritable is the user's to fix (exit 2)."""
    try:
        yield
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise UsageError(
            f"cannot write the outputs in {out_dir} ({reason}); "
            "free some space or choose another --out"
        ) from None
