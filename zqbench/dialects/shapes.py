"""What each dialect's shape rules share: the `ApiShapes` record and the small checks.

A dialect's response shapes are the conformance suite's rules for what a well-formed
response of its API looks like (`zqbench.conform.checks.api`); each dialect module names
its own (`anthropic_shapes.py`, `openai_shapes.py`) as the `shapes` of its class. Every
rule returns the problems it found (empty = conforms). Only what the SDKs rely on is
required (the fields and events their response types read); unknown extra fields and
unknown event types are allowed, as both APIs promise to add them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from zqbench.dialects.sse import SSEEvent
from zqbench.printable import shown


@dataclass(frozen=True, slots=True)
class Reading:
    """What a rule over a streamed tool call or thinking found: the problems (empty =
    conforms), the facts a report shows, and why nothing could be judged (None: judged)."""

    problems: list[str]
    facts: dict[str, Any]
    unjudged: str | None = None


@dataclass(frozen=True, slots=True)
class ApiShapes:
    noun: str  # what a non-streamed response body is called
    body: Callable[[Any], list[str]]  # a non-streamed response body's JSON
    stream: Callable[[list[SSEEvent]], list[str]]  # a streamed response's events
    models: Callable[[Any], list[str]]  # GET /v1/models's JSON
    # A streamed answer to a request that named the one tool (its name) it must call.
    tool_call: Callable[[list[SSEEvent], str], Reading]
    # A streamed answer to a request that asked for thinking.
    thinking: Callable[[list[SSEEvent]], Reading]


def is_count(x: Any) -> bool:
    """`x` is a token count: a non-negative integer (a bool is not one)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def object_rule(rule: Callable[[dict[str, Any], list[str]], None]) -> Callable[[Any], list[str]]:
    """A rule over a JSON object, as a rule over any JSON: what is not an object is the one
    problem, else the problems `rule` appends to its list."""

    @functools.wraps(rule)
    def check(obj: Any) -> list[str]:
        if not isinstance(obj, dict):
            return ["the body is not a JSON object"]
        problems: list[str] = []
        rule(obj, problems)
        return problems

    return check


def need(path: str, ok: bool, problems: list[str], what: str) -> None:
    """`path: what` is a problem unless `ok`."""
    if not ok:
        problems.append(f"{path}: {what}")


def need_value(
    obj: dict[str, Any], key: str, value: str, problems: list[str], where: str = ""
) -> None:
    """`obj[key]` is `value`."""
    got = obj.get(key)
    need(f"{where}{key}", got == value, problems, f"{got!r} is not {value!r}")


def need_str(obj: dict[str, Any], key: str, problems: list[str], where: str = "") -> None:
    """`obj[key]` is a string."""
    need(f"{where}{key}", isinstance(obj.get(key), str), problems, "not a string")


def model_entries(obj: Any, problems: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects of a models list's `data`, each with its path ("data[0]."); what is not
    an object, or a `data` that is not a non-empty list, is a problem."""
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        problems.append("data: not a non-empty list")
        return
    for i, m in enumerate(data):
        if isinstance(m, dict):
            yield f"data[{i}].", m
        else:
            problems.append(f"data[{i}]: not an object")


def event_json(event: SSEEvent) -> Any:
    """An event's data as JSON; None when it is not (or is `[DONE]`)."""
    try:
        return json.loads(event.data)
    except (ValueError, RecursionError):
        return None


def usage_counts(usage: Any, where: str, problems: list[str], counts: tuple[str, ...]) -> None:
    """`usage` is an object whose `counts` are token counts."""
    if not isinstance(usage, dict):
        problems.append(f"{where}: not an object")
        return
    for key in counts:
        need(f"{where}.{key}", is_count(usage.get(key)), problems, "not a count")


def arguments_object(text: str, where: str, problems: list[str], *, cut: bool) -> str | None:
    """A call's arguments, its pieces joined into `text`, must be a JSON object (what the
    SDKs parse them into). A call cut at max_tokens may end unfinished: then `text` must at
    least open an object (`1499e`, `null` never become one), and the reason that nothing
    more can be judged is returned."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        if cut and text.lstrip().startswith("{"):
            return (
                f"the call was cut at max_tokens before its arguments closed "
                f"({len(text)} characters): inconclusive"
            )
        value = None
    if not isinstance(value, dict):
        problems.append(f"{where}: the arguments {shown(text, 80)!r} are not a JSON object")
    return None
