"""Strict TOML tables: read a table key by key, every problem one line naming the file,
the key, the value and what is allowed.

    t = Table("burst.toml", "load", data["load"], allowed=("executor", "rate", ...))
    t.duration("duration", positive=True)   -> 30.0, or ScenarioError:
        burst.toml: load.duration = 30 must be a string with a unit, e.g. "30s", ...

Unknown keys are errors (with the closest allowed key as a hint), so a typo never falls back
to a default. Scenario files (`zqbench.scenario`) and the executors' `[load]` tables
(`zqbench.load`) share it.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from zqbench.errors import ScenarioError

T = TypeVar("T")
D = TypeVar("D")

_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_DURATION_FULL = re.compile(r"(?:\d+(?:\.\d+)?(?:us|ms|s|m|h))+")


def show(value: Any) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, list, dict)):
        # A TOML date or time inside a list or table shows as written, never a TypeError.
        return json.dumps(value, default=str)
    return str(value)


class Table:
    """One TOML table plus the file label and key prefix for messages."""

    def __init__(self, label: str, prefix: str, data: Any, allowed: tuple[str, ...]) -> None:
        self.label = label
        self.prefix = prefix
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{label}: {prefix} must be a table, got {show(data)}")
        self.data = data
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f'; did you mean "{self.key(close[0])}"?' if close else ""
                where = f"[{prefix}]" if prefix else "the top level"
                raise ScenarioError(
                    f'{label}: unknown key "{self.key(key)}"{hint} '
                    f"(allowed in {where}: {', '.join(allowed)})"
                )

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.label}: {self.key(name)} = {show(self.data[name])} {problem}")

    def require(self, *names: str, why: str = "") -> None:
        """ScenarioError naming the first of `names` the table lacks, and `why` it is needed."""
        for name in names:
            if name not in self.data:
                raise ScenarioError(f"{self.label}: {self.key(name)} is missing{why}")

    def has(self, name: str) -> bool:
        return name in self.data

    def string(self, name: str, default: str | None = None) -> str | None:
        return self._optional(name, str, default, "must be a string")

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str | None:
        v = self.string(name, default)
        if v is not None and v not in allowed:
            raise self.fail(name, f"is not one of {', '.join(allowed)}")
        return v

    def boolean(self, name: str, default: bool) -> bool:
        return self._optional(name, bool, default, "must be true or false")

    def _optional(self, name: str, kind: type[T], default: D, problem: str) -> T | D:
        """The key's value when it is a `kind`, `default` when the key is absent."""
        if name not in self.data:
            return default
        v = self.data[name]
        if not isinstance(v, kind):
            raise self.fail(name, problem)
        return v

    def number(self, name: str, *, minimum: float = 0.0, strict: bool = False) -> float:
        v = self.data[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(name, "must be a number")
        if v < minimum or (strict and v == minimum):
            raise self.fail(name, f"must be {'>' if strict else '>='} {minimum:g}")
        return float(v)

    def integer(self, name: str, *, minimum: int) -> int:
        v = self.data[name]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(name, "must be a whole number")
        if v < minimum:
            raise self.fail(name, f"must be >= {minimum}")
        return v

    def duration(self, name: str, *, positive: bool = False) -> float:
        v = self.data[name]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            raise self.fail(
                name,
                'must be a string with a unit, e.g. "30s", "500ms", "2m" '
                "(a bare number could mean seconds or milliseconds)",
            )
        if not isinstance(v, str) or not _DURATION_FULL.fullmatch(v.strip()):
            raise self.fail(
                name, 'is not a duration; use a number with a unit us, ms, s, m or h, e.g. "30s"'
            )
        seconds = sum(float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(v))
        if positive and seconds <= 0:
            raise self.fail(name, "must be longer than 0s")
        return seconds


def parse_duration(text: str) -> float:
    """Seconds in a duration string such as "500ms", "30s", "2m", "1h" or "1m30s"."""
    t = Table("duration", "", {"value": text}, ("value",))
    return t.duration("value")
