"""ConformOptions refuse values no run could use, in the library's words; the CLI shows the
same problem under its own flag (exit 2), before any server starts or request is sent."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from typer.testing import CliRunner

from zqbench.cli import app
from zqbench.conform import ConformOptions
from zqbench.conform.options import parse_expectation, parse_steps
from zqbench.errors import OptionError

runner = CliRunner()
BASE = ConformOptions(target="http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timeout_s": -1.0}, "timeout_s -1.0: must be positive"),
        ({"overload_concurrency": 0}, "overload_concurrency 0: must be positive"),
        ({"slope_steps": (4,)}, "slope_steps 4: needs at least two concurrencies >= 1"),
        ({"queue_margin_ms": -1.0}, "queue_margin_ms -1.0: must be >= 0"),
        ({"queue_share": 1.0}, "queue_share 1.0: must be in [0, 1)"),
        ({"false_refusal_share": -0.1}, "false_refusal_share -0.1: must be in [0, 1]"),
        ({"retry_share": 1.5}, "retry_share 1.5: must be in [0, 1]"),
        ({"disconnect_max_tokens": 0}, "disconnect_max_tokens 0: must be positive"),
        ({"disconnect_bound_s": 0.0}, "disconnect_bound_s 0.0: must be positive"),
        ({"apis": ("grpc",)}, "apis grpc: must be among anthropic, openai"),
        ({"expect_headers": ("x",)}, "expect_headers 'x': use 'NAME=VALUE' or 'NAME~REGEX'"),
    ],
)
def test_bad_values_raise_option_errors_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError) as info:
        dataclasses.replace(BASE, **change)
    assert str(info.value) == message
    assert info.value.option == next(iter(change))
    assert info.value.exit_code == 2


def test_text_values_parse_or_say_what_is_wrong() -> None:
    assert parse_steps("1,2,4") == (1, 2, 4)
    with pytest.raises(OptionError, match=r"^slope_steps '1,x': integers, comma-separated$"):
        parse_steps("1,x")
    assert parse_expectation("X-A = b").value == "b"
    assert parse_expectation("x-a~^b+$").problem({"x-a": "bbb"}) is None
    with pytest.raises(OptionError, match="bad regular expression"):
        parse_expectation("x-a~(")
    with pytest.raises(OptionError, match="'x a' is not a header name"):
        parse_expectation("x a=1")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--timeout", "-1"], "--timeout -1.0: must be positive"),
        (["--slope-steps", "1,x"], "--slope-steps '1,x': integers, comma-separated"),
        (["--slope-steps", "8"], "--slope-steps 8: needs at least two concurrencies >= 1"),
        (["--queue-margin-ms", "-5"], "--queue-margin-ms -5.0: must be >= 0"),
        (["--expect-header", "nope"], "--expect-header 'nope': use 'NAME=VALUE' or 'NAME~REGEX'"),
        (
            ["--api-key-env", "ZQ_SURELY_UNSET_VAR"],
            "--api-key-env ZQ_SURELY_UNSET_VAR: the variable is not set or empty",
        ),
        (["--overload-concurrency", "0"], "--overload-concurrency 0: must be positive"),
        (["--retry-share", "2"], "--retry-share 2.0: must be in [0, 1]"),
        (["--disconnect-bound-s", "-1"], "--disconnect-bound-s -1.0: must be positive"),
    ],
)
def test_the_cli_names_the_flag(flags: list[str], message: str) -> None:
    """No --target: the embedded server would start, so these must fail before it does."""
    result = runner.invoke(app, ["conform", *flags])
    assert result.exit_code == 2, result.output
    assert f"zqbench: error: {message}" in result.output
    assert "starting the reference server" not in result.output
    assert "Traceback" not in result.output


def test_an_unknown_api_lists_the_choices() -> None:
    result = runner.invoke(app, ["conform", "--api", "grpc"])
    assert result.exit_code == 2
    assert "anthropic" in result.output and "openai" in result.output and "all" in result.output
