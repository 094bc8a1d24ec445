"""`zqbench.dialects.DIALECTS` is the one list of APIs: the option enums, the CLI's `--api`
choices, the scenario's `api` key and the conformance catalogue all follow it, in its order.

The last test registers a third dialect in a fresh interpreter, before anything else is
imported, and finds it in every one of those places: nothing else lists the APIs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zqbench.cli import app
from zqbench.cli.conform import ConformApi, _apis
from zqbench.conform import ConformOptions
from zqbench.conform.catalogue import CATALOGUE
from zqbench.dialects import DEFAULT_API, DIALECTS
from zqbench.dialects.shapes import ApiShapes
from zqbench.errors import OptionError, ScenarioError
from zqbench.option_values import Api, ApiChoice
from zqbench.scenario import APIS, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
CLI_COMMANDS = ("run", "sweep", "probe")  # those with `--api [<dialects>|auto]`
runner = CliRunner()
LOAD = {"load": {"executor": "constant-arrival-rate", "rate": 10, "duration": "5s"}}


def _api_choices(help_text: str) -> tuple[str, ...]:
    """The `--api` choices a command's `--help` lists: `[a|b|auto]` or `<auto|a|b|all>`."""
    found = re.search(r"--api\s+[\[<]([^\]>]+)[\]>]", help_text)
    assert found, help_text
    return tuple(found.group(1).split("|"))


def _help(command: str) -> str:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_each_dialect_is_registered_under_its_own_name() -> None:
    assert tuple(DIALECTS) == ("anthropic", "openai")
    assert DEFAULT_API == "anthropic"
    for name, cls in DIALECTS.items():
        assert cls.name == name
        assert isinstance(cls.shapes, ApiShapes)
        assert cls.usage_statement
    with pytest.raises(TypeError):
        DIALECTS["grpc"] = DIALECTS["openai"]  # type: ignore[index]


def test_the_option_enums_follow_the_registry() -> None:
    assert Api.values() == tuple(DIALECTS)
    assert ApiChoice.values() == (*DIALECTS, "auto")
    for name in DIALECTS:
        assert Api.parse(name, "api") is Api(name)
        assert ApiChoice.parse(name, "api").api() is Api(name)
        assert str(ApiChoice(name)) == name
    assert ApiChoice.auto.api() is None
    with pytest.raises(OptionError) as info:
        Api.parse("grpc", "api")
    assert str(info.value) == "api 'grpc': choose one of anthropic, openai"
    with pytest.raises(OptionError) as info:
        ApiChoice.parse("grpc", "api")
    assert str(info.value) == "api 'grpc': choose one of anthropic, openai, auto"


def test_conform_api_choices_follow_the_registry() -> None:
    assert tuple(c.value for c in ConformApi) == ("auto", *DIALECTS, "all")
    assert _apis(ConformApi.all) == tuple(DIALECTS)
    assert _apis(ConformApi.auto) == ()
    for name in DIALECTS:
        assert _apis(ConformApi(name)) == (name,)
    assert ConformOptions(target="http://x").apis == (DEFAULT_API,)
    with pytest.raises(OptionError) as info:
        ConformOptions(target="http://x", apis=("grpc",))
    assert str(info.value) == "apis grpc: must be among anthropic, openai"


def test_the_cli_api_choices_follow_the_registry() -> None:
    for command in CLI_COMMANDS:
        assert _api_choices(_help(command)) == (*DIALECTS, "auto"), command
    assert _api_choices(_help("conform")) == ("auto", *DIALECTS, "all")
    with pytest.raises(OptionError) as info:
        ApiChoice.parse("grpc", "api")
    assert info.value.render("--api") == "--api 'grpc': choose one of anthropic, openai, auto"


def test_the_scenario_api_follows_the_registry(tmp_path: Path) -> None:
    assert tuple(DIALECTS) == APIS
    for name in DIALECTS:
        assert (
            parse_scenario({"api": name, **LOAD}, "x.toml", default_name="x", source="").api == name
        )
    assert parse_scenario(LOAD, "x.toml", default_name="x", source="").api == DEFAULT_API
    path = tmp_path / "x.toml"
    path.write_text(
        'api = "grpc"\n[load]\nexecutor = "constant-arrival-rate"\nrate = 10\nduration = "5s"\n'
    )
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(path))
    assert str(info.value) == f'{path}: api = "grpc" is not one of anthropic, openai'
    with pytest.raises(OptionError, match=r"^api grpc: is not one of anthropic, openai$"):
        load_scenario("burst").with_overrides(api="grpc")


def test_the_conform_catalogue_has_an_api_group_per_dialect() -> None:
    groups = list(dict.fromkeys(c.group for c in CATALOGUE if c.group.startswith("api.")))
    assert groups == [f"api.{name}" for name in DIALECTS]
    for name, cls in DIALECTS.items():
        checks = [c for c in CATALOGUE if c.group == f"api.{name}"]
        assert [c.id for c in checks] == [f"api.{name}.{n}" for n in range(1, 8)]
        assert cls.shapes.noun in checks[0].statement
        assert checks[2].statement == cls.usage_statement
        assert checks[3].statement.startswith(cls.stop_field)


# Run in a fresh interpreter: registers `fake` (OpenAI's wire format under another name)
# before any module that reads the registry is imported, then reports what each one offers.
_NEW_DIALECT = """
import json, types
import zqbench.dialects as dialects
from zqbench.dialects.openai import OpenAIDialect

class FakeDialect(OpenAIDialect):
    name = "fake"
    usage_statement = "Fake usage."

dialects.DIALECTS = types.MappingProxyType({**dialects.DIALECTS, "fake": FakeDialect})

from typer.testing import CliRunner
from zqbench.cli import app
from zqbench.cli.conform import ConformApi
from zqbench.conform import ConformOptions
from zqbench.conform.catalogue import CATALOGUE
from zqbench.dialects.base import DialectConfig
from zqbench.option_values import Api, ApiChoice
from zqbench.scenario import APIS, parse_scenario

load = {"load": {"executor": "constant-arrival-rate", "rate": 10, "duration": "5s"}}
runner = CliRunner()
print(json.dumps({
    "api": Api.values(),
    "api_choice": ApiChoice.values(),
    "conform_api": [c.value for c in ConformApi],
    "help": {
        command: runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        for command in ("run", "sweep", "probe", "conform")
    },
    "scenario": [APIS, parse_scenario({"api": "fake", **load}, "x", default_name="x",
                                      source="").api],
    "conform_options": ConformOptions(target="http://x", apis=("fake",)).apis,
    "catalogue": [c.id for c in CATALOGUE if c.group == "api.fake"],
    "statement": [c.statement for c in CATALOGUE if c.id == "api.fake.3"],
    "dialect": dialects.get_dialect("fake", DialectConfig(model="m")).name,
}))
"""


def test_a_new_dialect_is_one_registry_line() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _NEW_DIALECT], capture_output=True, text=True, cwd=REPO, check=True
    )
    got = json.loads(out.stdout)
    names = ["anthropic", "openai", "fake"]
    assert got["api"] == names
    assert got["api_choice"] == [*names, "auto"]
    assert got["conform_api"] == ["auto", *names, "all"]
    for command in CLI_COMMANDS:
        assert _api_choices(got["help"][command]) == (*names, "auto"), command
    assert _api_choices(got["help"]["conform"]) == ("auto", *names, "all")
    assert got["scenario"] == [names, "fake"]
    assert got["conform_options"] == ["fake"]
    assert got["catalogue"] == [f"api.fake.{n}" for n in range(1, 8)]
    assert got["statement"] == ["Fake usage."]
    assert got["dialect"] == "fake"
