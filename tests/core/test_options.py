"""Options are checked in the library's words; the CLI shows the same problem with its flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from zqbench.cli import app
from zqbench.errors import OptionError
from zqbench.option_values import (
    ApiChoice,
    CalibrationMode,
    H1Client,
    ServerEngine,
    ServerScheduler,
)
from zqbench.pipeline.run import RunOptions
from zqbench.target.probe import ProbeOptions

runner = CliRunner()


def test_choice_strings_become_the_librarys_enums() -> None:
    options = RunOptions.of(
        api="openai", h1_client="aiohttp", calibration="off", server_engine="sim",
        server_scheduler="fifo",
    )  # fmt: skip
    assert options.endpoint.api is ApiChoice.openai
    assert options.connection.h1_client is H1Client.aiohttp
    assert options.endpoint.calibration is CalibrationMode.off
    assert options.server.server_engine is ServerEngine.sim
    assert options.server.server_scheduler is ServerScheduler.fifo
    assert f"{options.server.server_scheduler}" == "fifo"
    assert ProbeOptions(target="http://x", api="openai").api is ApiChoice.openai  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "option", "message"),
    [
        ({"workers": 0}, "workers", "workers 0: must be at least 1"),
        ({"max_context": 1}, "max_context", "max_context 1: must be at least 2 tokens"),
        ({"rate_scale": 0.0}, "rate_scale", "rate_scale 0: must be greater than 0"),
        ({"duration_scale": -1.0}, "duration_scale", "duration_scale -1: must be greater than 0"),
        ({"h1_client": "curl"}, "h1_client", "h1_client 'curl': choose one of raw, aiohttp"),
        ({"api": "grpc"}, "api", "api 'grpc': choose one of anthropic, openai, auto"),
        (
            {"calibration": "sometimes"},
            "calibration",
            "calibration 'sometimes': choose one of auto, fresh, off",
        ),
        (
            {"server_scheduler": "lifo"},
            "server_scheduler",
            "server_scheduler 'lifo': choose one of zero-queue, fifo",
        ),
        ({"headers": ("X-A 1",)}, "headers", "headers 'X-A 1': expected 'Name: value'"),
        ({"headers": (": v",)}, "headers", "headers ': v': expected 'Name: value'"),
        (
            {"api_key_env": "ZQ_SURELY_UNSET_VAR"},
            "api_key_env",
            "api_key_env ZQ_SURELY_UNSET_VAR: the variable is not set or empty",
        ),
    ],
)
def test_a_bad_option_is_an_option_error_naming_the_field(
    fields: dict[str, object], option: str, message: str
) -> None:
    with pytest.raises(OptionError) as caught:
        RunOptions.of(**fields)
    assert caught.value.option == option
    assert caught.value.message == message


def test_the_cli_names_the_flag_of_the_field() -> None:
    """`headers` is `--header`/-H, `n` is `-n`: the message uses the command's own flag."""
    bad_header = runner.invoke(app, ["run", "smoke", "-H", "X-A 1"])
    assert bad_header.exit_code == 2
    assert bad_header.output == "zqbench: error: --header 'X-A 1': expected 'Name: value'\n"
    bad_n = runner.invoke(app, ["probe", "--target", "http://127.0.0.1:1", "-n", "0"])
    assert bad_n.exit_code == 2
    assert bad_n.output == "zqbench: error: -n 0: must be at least 1\n"
    bad_choice = runner.invoke(app, ["sweep", "--server-scheduler", "lifo"])
    assert bad_choice.exit_code == 2
    assert bad_choice.output == (
        "zqbench: error: --server-scheduler 'lifo': choose one of zero-queue, fifo\n"
    )


@pytest.mark.parametrize("command", ["run", "sweep", "probe"])
def test_help_lists_the_values_of_every_choice(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "[anthropic|openai|auto]" in result.output
    if command != "probe":
        assert "[zero-queue|fifo]" in result.output
        assert "[auto|torch|sim]" in result.output
    if command == "run":
        assert "[raw|aiohttp]" in result.output
        assert "[auto|fresh|off]" in result.output


def test_every_option_is_in_exactly_one_group() -> None:
    """RunOptions is its groups, and no two groups share a field: a flat name (the command
    line's, `RunOptions.of`) fills one group, the one the stage that uses it takes."""
    import dataclasses

    from zqbench.pipeline import options as o

    names = [f.name for kind in o.GROUPS.values() for f in dataclasses.fields(kind)]
    assert len(names) == len(set(names))
    run = o.RunOptions.of(seed=7, http2=True, min_samples=3, target="http://127.0.0.1:9")
    assert {name: type(getattr(run, name)) for name in o.GROUPS} == o.GROUPS
    assert (run.plan.seed, run.endpoint.http2, run.validity.min_samples) == (7, True, 3)
    with pytest.raises(TypeError, match="no option 'sed'"):
        o.RunOptions.of(sed=7)


def test_each_groups_flags_are_named_after_its_fields() -> None:
    """A group's flags are declared once (zqbench/cli/groups.py), each named after the field
    it fills: a flag is added there and as the group's field, and none is dropped."""
    import dataclasses

    from zqbench.cli import groups as g
    from zqbench.pipeline.options import GROUPS

    flags = [g.PLAN, g.ENDPOINT, g.SERVER, g.CONNECTION, g.BESIDE, g.VALIDITY, g.DISTRIBUTION]
    assert {f.name for f in [*flags, g.OUTPUT]} == set(GROUPS)
    for group in flags:
        fields = {f.name for f in dataclasses.fields(GROUPS[group.name])}
        assert set(group.accepts) - {"ctx"} <= fields, group.name
    assert set(g.OUTPUT.accepts) == {"out", "html", "inconclusive_ok"}  # inconclusive_fails


class _Called(Exception):
    """Raised by a stand-in for the library: the command got this far."""


def _options_of(monkeypatch: pytest.MonkeyPatch, module: str, name: str, argv: list[str]) -> dict:
    """What the command at `argv` passed to the library function `module.name`."""
    import importlib

    seen: dict = {}

    def called(options: RunOptions, **kw: object) -> None:
        seen.update(kw, options=options)
        raise _Called

    monkeypatch.setattr(importlib.import_module(module), name, called)
    result = runner.invoke(app, argv)
    assert isinstance(result.exception, _Called), result.output
    return seen


def test_run_builds_every_group_from_its_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from zqbench.pipeline import options as o

    argv = ["run", "smoke", "-q", "-H", "X-A: 1", "--http2", "--h1-client", "aiohttp",
            "--workers", "2", "--max-schedule-lag", "20ms", "--telemetry", "nvml",
            "--inconclusive-ok", "--server-arg=--x", "--out", "o"]  # fmt: skip
    options = _options_of(monkeypatch, "zqbench.pipeline.run", "run_scenario", argv)["options"]
    assert options == o.RunOptions(
        plan=o.PlanOptions(scenario="smoke", workers=2),
        endpoint=o.TargetOptions(headers=("X-A: 1",), http2=True),
        server=o.ServerOptions(server_args=("--x",)),
        beside=o.HookOptions(telemetry=("nvml",)),
        connection=o.ConnectionOptions(h1_client=H1Client.aiohttp),
        validity=o.ValidityOptions(max_schedule_lag_s=0.02),
        output=o.OutputOptions(out=Path("o"), inconclusive_fails=False),
    )


def test_a_command_that_takes_part_of_a_group_leaves_the_rest_at_their_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`sweep` offers some flags of a group: they fill it, its own flags stay its own."""
    from zqbench.pipeline import options as o

    argv = ["sweep", "smoke", "--seed", "7", "--max-context", "64", "--no-html",
            "--no-server-metrics", "--server-engine", "sim", "--min-rate", "2"]  # fmt: skip
    seen = _options_of(monkeypatch, "zqbench.pipeline.sweep", "run_sweep", argv)
    assert seen["options"] == o.RunOptions(
        plan=o.PlanOptions(scenario="smoke", seed=7),
        endpoint=o.TargetOptions(max_context=64),
        server=o.ServerOptions(server_engine=ServerEngine.sim),
        beside=o.HookOptions(server_metrics=False),
        output=o.OutputOptions(html=False),
    )
    assert seen["overrides"] == {"min_rate": 2.0}


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("X-A: b\r\nX-Injected: 1", "contains a control character"),
        ("X-A: b\x00", "contains a control character"),
        ("X-A: héllo", "must be ASCII (HTTP header text)"),
    ],
)
def test_a_header_that_cannot_go_on_the_wire_is_refused_before_the_load(
    header: str, problem: str
) -> None:
    """#25 item 9: a CR/LF or non-ASCII --header crashed every request (exit 5, no sample);
    it is refused when the options are built, named by its header name only."""
    from zqbench.pipeline.options import RunOptions

    with pytest.raises(OptionError) as err:
        RunOptions.of(headers=(header,))
    assert (err.value.option, err.value.problem, err.value.value) == ("headers", problem, "'X-A'")
    tab = RunOptions.of(headers=("X-A: a\tb",))  # a tab is allowed
    assert tab.endpoint.headers == ("X-A: a\tb",)
