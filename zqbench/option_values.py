"""The values options take, parsed and checked in the library's own words.

    Api.parse("grpc", "api")          -> OptionError: api 'grpc': choose one of anthropic, openai
    parse_headers(("X-A: 1",))        -> (("X-A", "1"),)
    read_api_key("KEY_VAR")           -> the variable's value, or OptionError when unset

Every error is an `OptionError` naming the options field (`api`, `headers`, ...); the CLI,
which knows its flags, shows the same message with the flag's name. The choices are
str-valued enums, so the options dataclasses and the CLI's `--help` share one list; the
API names are the dialect registry's (`zqbench.dialects.DIALECTS`). Imported by the CLI at
startup: the standard library and that registry only (itself standard library only).
"""

from __future__ import annotations

import math
import os
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from zqbench.dialects import DIALECTS
from zqbench.errors import OptionError
from zqbench.redact import is_sensitive, remember_secret

_C = TypeVar("_C", bound="Choice")


class Choice(str, Enum):
    """One value of a closed set; it compares equal to, and prints as, its string value."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(str(member.value) for member in cls)

    @classmethod
    def parse(cls: type[_C], value: str, option: str) -> _C:
        """The member whose value is `value`; OptionError naming `option` otherwise."""
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(cls.values())
            raise OptionError(option, f"choose one of {choices}", value=repr(value)) from None


class _ApiChoice(Choice):
    """`--api`: one API, or auto (probe the target: zqbench.target.resolve; the embedded server
    keeps the scenario's)."""

    def api(self) -> Api | None:
        """The API asked for; None for auto."""
        return None if self is ApiChoice.auto else Api(self.value)


# `Api` (the API family a target speaks, the dialect of every request) and `ApiChoice` have
# one member per registered dialect, in the registry's order, so a new dialect is a choice
# everywhere without an edit here. mypy reads only enums whose members are written out: it
# is shown the same classes without the dialects' members, which no code may name (that
# would branch on an API's name).
if TYPE_CHECKING:

    class Api(Choice): ...

    class ApiChoice(_ApiChoice):
        auto = "auto"

else:
    Api = Choice("Api", [(name, name) for name in DIALECTS], module=__name__)
    ApiChoice = _ApiChoice(
        "ApiChoice", [*((name, name) for name in DIALECTS), ("auto", "auto")], module=__name__
    )


class H1Client(Choice):
    """The HTTP/1.1 transport: raw (measured fastest) or aiohttp (the reference)."""

    raw = "raw"
    aiohttp = "aiohttp"


class CalibrationMode(Choice):
    """Prompt sizing: auto (cached per target), fresh (probe again), off (a byte per token)."""

    auto = "auto"
    fresh = "fresh"
    off = "off"


class ServerEngine(Choice):
    """The embedded reference server's compute: auto (torch when importable), torch, sim."""

    auto = "auto"
    torch = "torch"
    sim = "sim"


class ServerScheduler(Choice):
    """The embedded reference server's admission: zero-queue (refuse) or fifo (queue)."""

    zero_queue = "zero-queue"
    fifo = "fifo"


def parse_headers(raw: tuple[str, ...], option: str = "headers") -> tuple[tuple[str, str], ...]:
    """'Name: value' strings as (name, value) pairs, both stripped."""
    parsed = []
    for item in raw:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise OptionError(option, "expected 'Name: value'", value=repr(item))
        name, value = name.strip(), value.strip()
        # Named by the header's name only: its value may be a credential.
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in name + value):
            # CR/LF would inject a header line; the transports refused it only per request.
            raise OptionError(option, "contains a control character", value=repr(name))
        if not (name + value).isascii():
            raise OptionError(option, "must be ASCII (HTTP header text)", value=repr(name))
        parsed.append((name, value))
        if is_sensitive(name):
            remember_secret(value)
    return tuple(parsed)


def read_api_key(env_var: str | None, option: str = "api_key_env") -> str | None:
    """The API key held by the environment variable `env_var` (None: no key).

    Keys are read from the environment, never from argv, so no process listing shows them."""
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise OptionError(option, "the variable is not set or empty", value=env_var)
    remember_secret(value)
    return value


def check_target(target: str) -> str:
    """A given --target that is blank is refused, never read as "no target": `--target
    "$URL"` with URL unset must not benchmark the bundled server instead."""
    if not target.strip():
        raise OptionError(
            "target",
            "is empty; give the endpoint's base URL (http://HOST:PORT), or leave --target out "
            "to start the bundled reference server",
            value=repr(target),
        )
    return target


def check_at_least(option: str, value: float | None, minimum: float, unit: str = "") -> None:
    """OptionError unless `value` (None: not given) is at least `minimum`."""
    if value is not None and value < minimum:
        raise OptionError(option, f"must be at least {minimum:g}{unit}", value=f"{value:g}")


def check_above(option: str, value: float, bound: float) -> None:
    """OptionError unless `value` is a finite number greater than `bound` (NaN and inf
    are refused: a deadline or a scale of inf cannot be honoured)."""
    if not value > bound:
        raise OptionError(option, f"must be greater than {bound:g}", value=f"{value:g}")
    if not math.isfinite(value):
        raise OptionError(option, "must be a finite number", value=f"{value:g}")
