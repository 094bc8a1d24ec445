"""`[request] tools`, `tool_choice` and `thinking_budget` (#42 item 4): the tools file in
either API's words, and every mistake one line naming the key, before any traffic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scenario.test_scenario import error_of, write
from zqbench.dialects.base import ToolDef, Tools
from zqbench.errors import ScenarioError
from zqbench.scenario import load_scenario

HEAD = """
name = "t"
[load]
executor = "constant-arrival-rate"
rate = 1
duration = "1s"
[request]
max_tokens = 32
"""
LOOKUP = {"type": "object", "properties": {"word": {"type": "string"}}}


def tools_file(tmp_path: Path, doc: object) -> None:
    (tmp_path / "tools.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))


def test_a_tools_file_in_either_apis_words_and_a_named_choice(tmp_path: Path) -> None:
    tools_file(
        tmp_path,
        [
            {"name": "lookup", "description": "look up", "parameters": LOOKUP},
            {"name": "search", "input_schema": {"properties": {}}},
            {"type": "function", "function": {"name": "fetch"}},
        ],
    )
    body = HEAD + 'tools = "tools.json"\ntool_choice = "search"\nthinking_budget = 16\n'
    request = load_scenario(write(tmp_path, body)).request
    assert request.tools == Tools(
        (
            ToolDef("lookup", "look up", LOOKUP),
            ToolDef("search", "", {"type": "object", "properties": {}}),
            ToolDef("fetch", "", {"type": "object"}),
        ),
        "search",
        named=True,
    )
    assert request.thinking_budget == 16


def test_the_bundled_tool_calls_scenario_names_its_tool() -> None:
    tools = load_scenario("tool-calls").request.tools
    assert tools is not None and tools.named and tools.choice == "lookup"
    assert [t.name for t in tools.offered] == ["lookup", "weather"]


FILE = 'tools = "tools.json"'
IN_FILE = 'request.tools = "tools.json" '


@pytest.mark.parametrize(
    ("doc", "extra", "problem"),
    [
        (None, FILE, IN_FILE + "cannot be read (No such file or directory)"),
        ("[1,", FILE, IN_FILE + "is not JSON (Expecting value: line 1 column 4 (char 3))"),
        ([], FILE, IN_FILE + "must be a JSON list of tools, at least one"),
        ([{"name": "a b"}], FILE,
         IN_FILE + '[0]: needs a name of 1 to 64 letters, digits, _ or - (got "a b")'),
        ([{"name": "a"}, {"name": "a"}], FILE, IN_FILE + "[1]: a second tool named 'a'"),
        ([{"name": "a", "parameters": {"type": "string"}}], FILE,
         IN_FILE + '[0]: its input schema must be an object ("type": "object")'),
        ([{"name": f"t{i}"} for i in range(129)], FILE, IN_FILE + "lists 129 tools; at most 128"),
        ([{"name": "a"}], FILE + '\ntool_choice = "b"',
         'request.tool_choice = "b" is not auto, any, none or a tool\'s name (a)'),
        (None, 'tool_choice = "auto"',
         'request.tool_choice = "auto" needs request.tools, the tools it chooses among'),
        (None, "thinking_budget = 32",
         "request.thinking_budget = 32 must be below max_tokens (32), which counts the thinking"),
        (None, "thinking_budget = 0", "request.thinking_budget = 0 must be >= 1"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line_naming_the_key(
    tmp_path: Path, doc: object, extra: str, problem: str
) -> None:
    if doc is not None:
        tools_file(tmp_path, doc)
    path = write(tmp_path, HEAD + extra + "\n")
    assert error_of(path) == f"{path}: {problem}"


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_conversation_offers_tools_but_not_with_thinking_on_the_messages_api(
    tmp_path: Path, api: str
) -> None:
    """A call's next turn on the Messages API must send the thinking block before the call
    back, signed; zqbench does not keep it, so the run is refused before any traffic. The
    OpenAI route sends no reasoning back."""
    from zqbench.sources import check_source

    tools_file(tmp_path, [{"name": "a"}])
    body = f"""
    name = "s"
    api = "{api}"
    [load]
    executor = "sessions"
    rate = 1
    duration = "1s"
    turns = 2
    [request]
    max_tokens = 32
    tools = "tools.json"
    """
    plain = load_scenario(write(tmp_path, body))
    check_source(plain)  # tools alone: a conversation sends each call's result back
    assert plain.request.tools is not None
    thinking = load_scenario(write(tmp_path, body + "    thinking_budget = 8\n"))
    if api == "openai":
        check_source(thinking)
        return
    with pytest.raises(ScenarioError) as info:
        check_source(thinking)
    assert str(info.value) == (
        f"{thinking.source}: request.tools with request.thinking_budget in sessions on the "
        "Messages API: a call's next turn must send its thinking block back, signed, which "
        'zqbench does not keep; drop thinking_budget (or tools), or use api = "openai"'
    )
