"""`profile`: a `zqbench run` whose server runs under a profiler, captured in a window.

1. the server command: the bundled reference server (torch engine), or the user's
   (after `--`, with --target its URL), wrapped in `nsys profile` / `ncu`, or given
   REFSERVER_TORCH_PROFILER_DIR (and vLLM's VLLM_TORCH_PROFILER_DIR) for torch
2. run_scenario, exactly as `zqbench run`, with `CaptureHook` among its hooks: it POSTs
   /start_profile and /stop_profile at the window's edges
3. the server stopped (a profiler writes its report then); the reports collected in
   <run>/profile/, `nsys stats` run on an nsys capture
4. summary.json gains a "profile" section, and summary.md / report.html are rendered
   again with it
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zqbench.engines.live import ProgressCallback
from zqbench.errors import OptionError
from zqbench.option_values import ServerEngine
from zqbench.outputs.json_out import write_atomic
from zqbench.outputs.paths import (
    SUMMARY_JSON,
    existing_ancestor,
    make_out_dir,
    removed_if_empty_on_error,
)
from zqbench.pipeline.plan import make_plan
from zqbench.pipeline.run import RunOptions, RunResult, run_scenario
from zqbench.pipeline.target import embedded_server
from zqbench.profile import report, tools
from zqbench.profile.report import PROFILE_DIR
from zqbench.profile.server import UserServer
from zqbench.profile.window import CaptureHook, WindowSpec
from zqbench.saved.report import rerender_run

TORCH_DIR_VARS = ("REFSERVER_TORCH_PROFILER_DIR", "VLLM_TORCH_PROFILER_DIR")


@dataclass(frozen=True)
class ProfileJob:
    tool: str  # nsys, ncu or torch
    window: WindowSpec
    server_command: tuple[str, ...] = ()  # after `--`; (): the bundled reference server
    dry_run: bool = False
    ncu: tools.NcuLimits = field(default_factory=tools.NcuLimits)
    slowest: int = 10  # requests listed, by TTFT inside the window


@dataclass(frozen=True)
class Launch:
    """How the server is started: the profiler's wrapper, the server, the environment."""

    wrap: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    profile_dir: Path
    tool_path: str | None  # the profiler's executable (nsys, ncu); None for torch

    def describe(self, server: Sequence[str]) -> str:
        """The exact command, as --dry-run prints it."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        line = shlex.join([*self.wrap, *server])
        return f"{env} {line}" if env else line


def profile(
    options: RunOptions,
    job: ProfileJob,
    *,
    on_progress: ProgressCallback | None = None,
    on_target: Callable[[str], None] | None = None,
    echo: Callable[[str], None] = print,
) -> RunResult | None:
    """Run the scenario under the profiler; None after a dry run (the commands echoed)."""
    options = _checked(options, job)
    plan = make_plan(options.plan, options.endpoint)
    job.window.resolve(plan.stages)  # a stage the scenario lacks: exit 2 now
    if job.dry_run:
        _print_dry_run(options, job, echo)
        return None
    exe = None if job.tool == "torch" else tools.find_tool(job.tool)  # before any folder
    out = options.output
    kept = existing_ancestor(Path(out.out) if out.out else out.reports_root)
    out_dir = make_out_dir(out.out, plan.scenario.name, root=out.reports_root)
    launch = _launch(job, out_dir / PROFILE_DIR, exe)
    launch.profile_dir.mkdir(parents=True, exist_ok=True)
    # A run that fails to start leaves no empty folder (profile/ and the run's own included).
    with removed_if_empty_on_error(launch.profile_dir, kept):
        return _profiled_run(options, job, launch, out_dir, on_progress, on_target)


def _profiled_run(
    options: RunOptions,
    job: ProfileJob,
    launch: Launch,
    out_dir: Path,
    on_progress: ProgressCallback | None,
    on_target: Callable[[str], None] | None,
) -> RunResult:
    endpoint = options.endpoint
    hook = CaptureHook(job.window, base_url=endpoint.target, api_key_env=endpoint.api_key_env)
    options = dataclasses.replace(
        options,
        output=dataclasses.replace(options.output, out=out_dir),
        beside=dataclasses.replace(options.beside, hooks=(*options.beside.hooks, hook)),
        server=dataclasses.replace(
            options.server,
            server_wrap=() if job.server_command else launch.wrap,
            server_env=() if job.server_command else launch.env,
        ),
    )
    with _user_server(options, job, launch, out_dir):
        result = run_scenario(options, on_progress=on_progress, on_target=on_target)
    section = report.build(job.tool, hook.log, out_dir, launch.tool_path, slowest=job.slowest)
    summary = result.summary.model_copy(update={"profile": section})
    write_atomic(out_dir / SUMMARY_JSON, summary.to_json())
    rerender_run(out_dir, inconclusive_fails=options.output.inconclusive_fails)
    return dataclasses.replace(result, summary=summary)


def _checked(options: RunOptions, job: ProfileJob) -> RunOptions:
    """The options a profile run needs: --target with `--`, the torch engine by default."""
    if job.tool not in tools.TOOLS:
        raise OptionError("tool", f"expected one of {', '.join(tools.TOOLS)}", value=job.tool)
    if job.server_command and options.endpoint.target is None:
        raise OptionError(
            "target", "a server command after `--` needs --target URL (where it will listen)"
        )
    if not job.server_command and options.endpoint.target is not None:
        raise OptionError(
            "target", "profile starts its server: give its command after `--`, or drop --target"
        )
    if options.distribution.distributed:
        raise OptionError("distributed", "a profile run is local; drop --distributed")
    if options.server.server_engine is ServerEngine.auto:
        server = dataclasses.replace(options.server, server_engine=ServerEngine.torch)
        options = dataclasses.replace(options, server=server)
    return options


def _launch(job: ProfileJob, profile_dir: Path, exe: str | None) -> Launch:
    """`exe`: the profiler's path (nsys, ncu); for torch, None."""
    if job.tool == "torch":
        env = tuple((name, str(profile_dir / "torch")) for name in TORCH_DIR_VARS)
        return Launch((), env, profile_dir, None)
    exe = exe or job.tool
    base = profile_dir / job.tool
    if job.tool == "nsys":
        wrap = tools.nsys_command(exe, base, ())
    else:
        wrap = tools.ncu_command(exe, base, (), job.ncu)
    return Launch(tuple(wrap), (), profile_dir, exe)


def _print_dry_run(options: RunOptions, job: ProfileJob, echo: Callable[[str], None]) -> None:
    """The commands a run would start, without starting anything or creating its folder."""
    out = options.output.out or options.output.reports_root / "<run folder>"
    launch = _launch(job, Path(out) / PROFILE_DIR, shutil.which(job.tool))
    if job.server_command:
        server = list(job.server_command)
    else:  # its port is chosen when it starts
        embedded = embedded_server(
            options.server, Path(out) / "reference_server.log", pin_cpus=False
        )
        args = embedded.command()[3:]  # after `python -c <script>`
        port = args.index("--port") + 1
        server = ["python", "-m", "reference_server", *args[:port], "<port>", *args[port + 1 :]]
    echo(launch.describe(server))
    window = job.window
    where = (
        "the whole run"
        if window.whole_run
        else f"stage {window.stage}"
        if window.stage
        else f"{window.start_s:g}s..{window.end_s:g}s"
    )
    echo(f"# capture: POST /start_profile and /stop_profile at the edges of {where}")
    if job.tool == "nsys":
        report_path = Path(out) / PROFILE_DIR / "nsys.nsys-rep"
        csv_base = Path(out) / PROFILE_DIR / "nsys_stats"
        stats = tools.nsys_stats_command(launch.tool_path or "nsys", report_path, csv_base)
        echo(shlex.join(stats))


@contextlib.contextmanager
def _user_server(
    options: RunOptions, job: ProfileJob, launch: Launch, out_dir: Path
) -> Iterator[None]:
    if not job.server_command:
        yield
        return
    target = options.endpoint.target
    assert target is not None
    command = [*launch.wrap, *job.server_command]
    with UserServer(command, target, env=launch.env, log_path=out_dir / "server.log"):
        yield
