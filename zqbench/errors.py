"""The exceptions zqbench raises, and the exit code each maps to.

    ZqbenchError                 exit code
    ├── UsageError               2  bad flag, scenario, SLO expression or config
    │   ├── OptionError          2  one option's value, named by its option (field) name
    │   └── ScenarioError        2  a scenario file that does not load or validate
    ├── TargetError              3  the target could not be reached, or the run could not start
    ├── InvalidRunError          4  the generator could not hold the schedule, too few samples
    └── InterruptedRun           130 Ctrl-C / SIGTERM; partial results were kept
    (any other exception)        5  a bug in zqbench: one line, the traceback with ZQBENCH_DEBUG=1

SLO failures are not exceptions: a finished run returns a verdict, and
`exit_code_for_verdict` maps it. Only `zqbench.cli` calls `sys.exit`.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_SLO_FAILED = 1
EXIT_USAGE = 2
EXIT_TARGET = 3
EXIT_INVALID = 4
EXIT_INTERNAL = 5  # any other exception: a bug in zqbench (only the CLI maps it)
EXIT_INTERRUPTED = 130


class ZqbenchError(Exception):
    """Base class: a one-line message for the user and an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(ZqbenchError):
    exit_code = EXIT_USAGE


class OptionError(UsageError):
    """A bad option value, said in the library's words: `workers 0: must be at least 1`.

    `option` is the options object's field name. The CLI, which knows its flags, shows the
    same message with the flag's name (`--workers 0: ...`) through `render`."""

    def __init__(self, option: str, problem: str, *, value: str | None = None) -> None:
        self.option = option
        self.value = value
        self.problem = problem
        super().__init__(self.render(option))

    def render(self, name: str) -> str:
        if self.value is None:
            return f"{name}: {self.problem}"
        return f"{name} {self.value}: {self.problem}"


class ScenarioError(UsageError):
    """A scenario that does not load; the message names the file, the key and what is allowed."""


class TargetError(ZqbenchError):
    exit_code = EXIT_TARGET


class InvalidRunError(ZqbenchError):
    exit_code = EXIT_INVALID


class InterruptedRun(ZqbenchError):
    exit_code = EXIT_INTERRUPTED


def exit_code_for_verdict(verdict: str, *, inconclusive_fails: bool = True) -> int:
    """Map a run verdict (`pass`, `fail`, `inconclusive`, `invalid`) to its exit code.

    The codes: docs/design.md, "Exit codes"."""
    if verdict == "pass":
        return EXIT_OK
    if verdict == "fail":
        return EXIT_SLO_FAILED
    if verdict == "inconclusive":
        return EXIT_SLO_FAILED if inconclusive_fails else EXIT_OK
    if verdict == "invalid":
        return EXIT_INVALID
    raise ValueError(f"unknown verdict {verdict!r}")
