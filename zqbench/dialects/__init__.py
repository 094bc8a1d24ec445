"""Protocol dialects: build requests and parse responses for one API family."""

from __future__ import annotations

from zqbench.dialects.anthropic import AnthropicDialect
from zqbench.dialects.base import Dialect, DialectConfig
from zqbench.dialects.openai import OpenAIDialect
from zqbench.errors import OptionError

_BY_NAME = {"anthropic": AnthropicDialect, "openai": OpenAIDialect}
DIALECTS = tuple(_BY_NAME)


def get_dialect(name: str, config: DialectConfig) -> Dialect:
    """The dialect called `name` (the `--api` flag / scenario `api`)."""
    cls = _BY_NAME.get(name)
    if cls is None:
        raise OptionError("api", "choose anthropic or openai", value=repr(name))
    return cls(config)


__all__ = ["DIALECTS", "AnthropicDialect", "OpenAIDialect", "get_dialect"]
