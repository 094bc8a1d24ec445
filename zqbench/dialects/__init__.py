"""Protocol dialects: build requests and parse responses for one API family.

`DIALECTS` is the one list of the APIs zqbench speaks: the option enums and `--api`
choices (`zqbench.option_values`, `zqbench.cli.conform`), the scenario's `api` key, API
detection and the conformance catalogue all take it from here, in its order. A new API is
its dialect module (a `DialectBase` subclass naming its facts and `shapes`), its tests, and
one line below. The modules here import only the standard library and the transport's
types, so the CLI imports this registry at startup.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from zqbench.dialects.anthropic import AnthropicDialect
from zqbench.dialects.base import Dialect, DialectConfig
from zqbench.dialects.openai import OpenAIDialect
from zqbench.dialects.parser import DialectBase
from zqbench.errors import OptionError

# name -> dialect class, each keyed by its own `name`. The order is the order of `--help`'s
# choices, of API detection (zqbench.target.resolve) and of the conformance catalogue.
DIALECTS: Mapping[str, type[DialectBase]] = MappingProxyType(
    {cls.name: cls for cls in (AnthropicDialect, OpenAIDialect)}
)

# The API of a scenario that names none, and of `ConformOptions` built without one.
DEFAULT_API = AnthropicDialect.name


def get_dialect(name: str, config: DialectConfig) -> Dialect:
    """The dialect called `name` (the `--api` flag / scenario `api`)."""
    cls = DIALECTS.get(name)
    if cls is None:
        raise OptionError("api", f"choose {' or '.join(DIALECTS)}", value=repr(name))
    return cls(config)


__all__ = ["DEFAULT_API", "DIALECTS", "AnthropicDialect", "OpenAIDialect", "get_dialect"]
