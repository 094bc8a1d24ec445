"""A dataset row's own `tools` and `tool_choice` (#42 item 4), in either API's words; a bad
one is a one-line error naming the row, before any traffic."""

from __future__ import annotations

import json

import pytest

from zqbench.dialects.base import ToolDef, Tools
from zqbench.sources.dataset_rows import DatasetError, parse_row

WHERE = "rows.jsonl:3"
FN = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}


def row(**fields: object) -> bytes:
    return json.dumps({"prompt": "hi", **fields}).encode()


@pytest.mark.parametrize(
    ("choice", "want"),
    [
        (None, ("auto", False)),
        ("required", ("any", False)),
        ("none", ("none", False)),
        ({"type": "function", "function": {"name": "weather"}}, ("weather", True)),
        ({"type": "tool", "name": "weather"}, ("weather", True)),
        ({"type": "any"}, ("any", False)),
    ],
)
def test_a_rows_tools_and_choice_in_either_apis_words(choice: object, want: tuple) -> None:
    fields: dict[str, object] = {"tools": [FN]}
    if choice is not None:
        fields["tool_choice"] = choice
    tools = parse_row(row(**fields), "jsonl", where=WHERE).tools
    assert tools == Tools((ToolDef("weather", "", {"type": "object"}),), *want)


def test_a_row_without_tools_offers_none() -> None:
    assert parse_row(row(), "jsonl", where=WHERE).tools is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tool_choice": "auto"}, '"tool_choice" without "tools"; give both or neither'),
        ({"tools": []}, '"tools" must be a JSON list of tools, at least one'),
        ({"tools": [FN], "tool_choice": "search"},
         '"tools" tool_choice "search" is not auto, any, none or an offered tool\'s name'),
        ({"tools": [{"name": "x", "parameters": []}]},
         '"tools" [0]: its input schema must be an object ("type": "object")'),
    ],
)  # fmt: skip
def test_a_bad_rows_tools_name_the_row(fields: dict, message: str) -> None:
    with pytest.raises(DatasetError) as err:
        parse_row(row(**fields), "jsonl", where=WHERE)
    assert str(err.value) == f"{WHERE}: {message}"
