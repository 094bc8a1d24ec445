"""Protocol dialects: build requests and parse responses for one API family."""

from __future__ import annotations

from zqbench.dialects.anthropic import AnthropicDialect
from zqbench.dialects.base import Dialect, DialectConfig
from zqbench.dialects.openai import OpenAIDialect
from zqbench.errors import UsageError

DIALECTS = ("anthropic", "openai")


def get_dialect(name: str, config: DialectConfig) -> Dialect:
    """The dialect called `name` (the `--api` flag / scenario `api`)."""
    if name == "anthropic":
        return AnthropicDialect(config)
    if name == "openai":
        return OpenAIDialect(config)
    raise UsageError(f"unknown --api {name!r}: choose anthropic or openai")


__all__ = ["DIALECTS", "AnthropicDialect", "OpenAIDialect", "get_dialect"]
