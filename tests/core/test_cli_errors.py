"""A bug in zqbench is one line and exit 5: never a traceback, never mistaken for exit 3."""

from __future__ import annotations

import sys

import pytest

import zqbench.cli as cli
import zqbench.scenario
from zqbench.errors import EXIT_INTERNAL


def _broken_listing() -> list[tuple[str, str]]:
    raise RuntimeError("boom in the listing")


def test_an_internal_error_is_one_line_and_exit_5(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(zqbench.scenario, "list_bundled", _broken_listing)
    monkeypatch.setattr(sys, "argv", ["zqbench", "scenarios"])
    monkeypatch.delenv("ZQBENCH_DEBUG", raising=False)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == EXIT_INTERNAL == 5
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "zqbench: internal error: RuntimeError: boom in the listing "
        "(set ZQBENCH_DEBUG=1 for the traceback, and please report it)"
    ]


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zqbench.scenario, "list_bundled", _broken_listing)
    monkeypatch.setattr(sys, "argv", ["zqbench", "scenarios"])
    monkeypatch.setenv("ZQBENCH_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom in the listing"):
        cli.main()


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["run", "--bogus"],
            "zqbench: error: No such option: --bogus (Possible options: --out) "
            "(see `zqbench run --help`)",
        ),
        (
            ["run", "--rate-scale", "abc"],
            "zqbench: error: Invalid value for '--rate-scale': Input should be a valid number, "
            "unable to parse string as a number (see `zqbench run --help`)",
        ),
        (["nosuchcmd"], "zqbench: error: No such command 'nosuchcmd'. (see `zqbench --help`)"),
    ],
)
def test_a_bad_flag_or_value_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    """#25 item 15: click's usage errors were typer's boxed panel over several lines."""
    monkeypatch.setattr(sys, "argv", ["zqbench", *argv])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [line]
