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
