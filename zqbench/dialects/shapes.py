"""What each dialect's shape rules share: the `ApiShapes` record and the small checks.

A dialect's response shapes are the conformance suite's rules for what a well-formed
response of its API looks like (`zqbench.conform.checks.api`); each dialect module names
its own (`anthropic_shapes.py`, `openai_shapes.py`) as the `shapes` of its class. Every
rule returns the problems it found (empty = conforms). Only what the SDKs rely on is
required (the fields and events their response types read); unknown extra fields and
unknown event types are allowed, as both APIs promise to add them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zqbench.dialects.sse import SSEEvent


@dataclass(frozen=True, slots=True)
class ApiShapes:
    noun: str  # what a non-streamed response body is called
    body: Callable[[Any], list[str]]  # a non-streamed response body's JSON
    stream: Callable[[list[SSEEvent]], list[str]]  # a streamed response's events
    models: Callable[[Any], list[str]]  # GET /v1/models's JSON


def is_count(x: Any) -> bool:
    """`x` is a token count: a non-negative integer (a bool is not one)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def need(path: str, ok: bool, problems: list[str], what: str) -> None:
    """`path: what` is a problem unless `ok`."""
    if not ok:
        problems.append(f"{path}: {what}")


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
