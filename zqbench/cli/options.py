"""The options zqbench's commands share: option types declared once, and option groups.

A command names each parameter after the field of the options dataclass it fills
(`headers` for `--header`, `timeout_s` for `--timeout`), so an `OptionError` about a field
is shown with that parameter's flag. `RunOptions`' groups have their flags in
`zqbench.cli.groups`; a command takes them with `takes`. Choices are the library's enums:
`--help` lists their values and the library parses them. Imported by the CLI at startup, so
it imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from zqbench import option_values as values
from zqbench.printable import one_line


def _duration_s(text: str, option: str) -> float:
    from zqbench.errors import OptionError, ScenarioError
    from zqbench.scenario import parse_duration

    try:
        return parse_duration(text)
    except ScenarioError:
        raise OptionError(
            option, 'is not a duration: use a number with a unit, e.g. "20ms"', value=text
        ) from None


def duration_option(flag: str, option: str, help: str) -> Any:
    """A typer option taking a duration with its unit (`20ms`), as seconds; a bad one is
    the library's OptionError about `option` (the parameter's name)."""
    return typer.Option(
        flag, parser=lambda text: _duration_s(text, option), metavar="DURATION", help=help
    )


def choice_option(kind: type[values.Choice], option: str, help: str) -> Any:
    """A typer option taking one of `kind`'s values, listed in --help; a bad value is the
    library's OptionError about `option` (the parameter's name)."""
    return typer.Option(
        parser=lambda value: kind.parse(value, option),
        metavar="[" + "|".join(kind.values()) + "]",
        help=help,
    )


def note(line: str) -> None:
    """A library's note for the user (the target resolved, a worker's state): one line on
    stderr."""
    typer.echo(one_line(line), err=True)


def fields_of(kind: type[Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters named like a field of the dataclass `kind`, as its keyword arguments.

    An unset parameter (None) is left out, so the field keeps its default; a repeatable
    one becomes a tuple."""
    names = {f.name for f in dataclasses.fields(kind)}
    return {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in params.items()
        if name in names and value is not None
    }


class Flags:
    """One `RunOptions` group's flags: the parameters of `declare` (typer `Annotated`
    declarations, in --help order), which returns the group's fields from them. `name` is
    the group's RunOptions field, and the keyword the command gets it under."""

    def __init__(
        self, name: str, declare: Callable[..., dict[str, Any]], only: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.declare = declare
        self.accepts = inspect.signature(declare, eval_str=True).parameters
        # One without a default is the command's context (`ctx`), which typer gives: always.
        self.offered = [
            p for p in self.accepts.values() if not only or p.name in only or p.default is p.empty
        ]

    def only(self, *names: str) -> Flags:
        """The group with only these flags on a command; the others keep their defaults."""
        return Flags(self.name, self.declare, names)

    def build(self, given: Mapping[str, Any]) -> Any:
        """The group from the command's parameters; a flag left unset keeps its default."""
        from zqbench.pipeline.options import GROUPS

        kind = GROUPS[self.name]
        fields = self.declare(**{k: v for k, v in given.items() if k in self.accepts})
        return kind(**fields_of(kind, fields))


def takes(*groups: Flags) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The command with each group's flags after its own parameters, but for its keyword-only
    ones, which come last (`--quiet`); its signature ends in `**groups`.

    It is called with its own parameters and each group built (`plan=PlanOptions(...)`).
    A group's parameter the command declares itself (`scenario`, an argument whose default
    is the command's; `ctx`) is given the command's value and is not a flag twice."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        names = {p.name for p in own}
        first = [p for p in own if p.kind is not p.KEYWORD_ONLY]
        last = [p for p in own if p.kind is p.KEYWORD_ONLY]
        flags = [p.replace(kind=p.KEYWORD_ONLY) for g in groups for p in g.offered]
        flags = [p for p in flags if p.name not in names]

        @functools.wraps(command)
        def with_groups(**given: Any) -> None:
            built = {g.name: g.build(given) for g in groups}
            command(**{name: given[name] for name in names}, **built)

        with_groups.__signature__ = signature.replace(parameters=[*first, *flags, *last])  # type: ignore[attr-defined]
        with_groups.__annotations__ = {}  # typer reads the signature's, already evaluated
        return with_groups

    return decorate


EMBEDDED_ONLY = ("server_scheduler", "server_engine", "server_args", "server_max_batch_size")


def refuse_given(ctx: typer.Context, name: str, problem: str) -> None:
    """UsageError `FLAG PROBLEM` when the parameter `name` was given on the command line
    (or by its environment variable); `{flag}` in `problem` names the flag too."""
    from zqbench.errors import UsageError

    source = ctx.get_parameter_source(name)  # None: the command has no such parameter
    # By name: typer's context may carry its own copy of click's ParameterSource.
    if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
        param = next(p for p in ctx.command.params if p.name == name)
        flag = max(param.opts, key=len)
        raise UsageError(f"{flag} {problem.format(flag=flag)}")


def refuse_embedded_options_with_target(ctx: typer.Context) -> None:
    """A --server-* flag sets up the bundled reference server, which --target replaces:
    given together, the flag would be silently ignored (a FIFO run that measured the
    remote zero-queue server). Exit 2 instead, naming both."""
    if ctx.params.get("target") is None:
        return
    for name in EMBEDDED_ONLY:
        problem = "sets up the bundled reference server, which --target replaces; drop {flag}"
        refuse_given(ctx, name, problem + " or --target")


ScenarioArg = Annotated[str, typer.Argument(help="Bundled scenario name or a TOML path.")]
TargetOpt = Annotated[
    str | None,
    typer.Option(
        parser=lambda text: values.check_target(text),
        help="Base URL of the endpoint. Default: start the bundled reference server.",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="Model name sent in each request. Default: the one GET /v1/models lists "
        "(the first of several, with a note)."
    ),
]
StrictModelOpt = Annotated[
    bool,
    typer.Option(
        "--strict-model", help="Without --model: fail when GET /v1/models lists several models."
    ),
]
HeadersOpt = Annotated[
    list[str] | None, typer.Option("--header", "-H", help="Extra header 'Name: value'.")
]
ApiKeyEnvOpt = Annotated[
    str | None,
    typer.Option(help="Environment variable holding the API key (never pass keys in argv)."),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Per-request timeout, seconds.")]
Http2Opt = Annotated[bool, typer.Option("--http2", help="HTTP/2 (h2c or ALPN).")]
ServerSchedulerOpt = Annotated[
    values.ServerScheduler,
    choice_option(
        values.ServerScheduler, "server_scheduler", "Embedded reference server: admission."
    ),
]
InconclusiveOkOpt = Annotated[
    bool, typer.Option(help="Exit 0 when the verdict is inconclusive rather than 1.")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No live view (CI logs).")]
RunDirArg = Annotated[Path, typer.Argument(help="A run folder (holds summary.json).")]
SecretEnvOpt = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="Environment variable holding the secret the master and its workers share and "
        "prove (never sent); default ZQBENCH_SECRET, at least 16 characters.",
    ),
]
