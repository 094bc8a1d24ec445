"""A tools file: the tools a tool-calling workload offers, in either API's words.

    [
      {"name": "lookup", "description": "...", "parameters": {"type": "object", ...}},
      {"name": "search", "input_schema": {...}},                          # Messages API
      {"type": "function", "function": {"name": "fetch", "parameters": {...}}}  # OpenAI
    ]

A JSON list of at most MAX_TOOLS tools; each needs a name (letters, digits, `_` and `-`, at
most 64, as both APIs require) unique in the file, and may have a description and a JSON
Schema object for its input (`parameters`, `input_schema`, or an OpenAI function's
`parameters`; `{"type": "object"}` when absent). The file is read once, when the scenario
loads: `ToolsFileError` says what is wrong, in one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from zqbench.dialects.base import ToolDef

MAX_TOOLS = 128  # the most either API takes in one request
MAX_FILE_BYTES = 4 << 20
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ToolsFileError(ValueError):
    """What is wrong with a tools file, worded to follow `path: `."""


def read_tools(path: Path) -> tuple[ToolDef, ...]:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ToolsFileError(f"cannot be read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ToolsFileError(f"is larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ToolsFileError(f"is not JSON ({exc})") from None
    return parse_tools(doc)


def parse_tools(doc: Any) -> tuple[ToolDef, ...]:
    """A list of tools (a tools file's, or a dataset row's `tools`)."""
    if not isinstance(doc, list) or not doc:
        raise ToolsFileError("must be a JSON list of tools, at least one")
    if len(doc) > MAX_TOOLS:
        raise ToolsFileError(f"lists {len(doc)} tools; at most {MAX_TOOLS}")
    tools = tuple(_tool(entry, i) for i, entry in enumerate(doc))
    names = [t.name for t in tools]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ToolsFileError(f"[{i}]: a second tool named {name!r}")
    return tools


def _tool(entry: Any, i: int) -> ToolDef:
    where = f"[{i}]"
    if not isinstance(entry, dict):
        raise ToolsFileError(f"{where}: must be an object")
    if entry.get("type") == "function" and isinstance(entry.get("function"), dict):
        entry = entry["function"]  # OpenAI's wrapping
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ToolsFileError(
            f"{where}: needs a name of 1 to 64 letters, digits, _ or - (got {json.dumps(name)})"
        )
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise ToolsFileError(f"{where}.description: must be a string")
    schema = entry.get("parameters", entry.get("input_schema", {"type": "object"}))
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise ToolsFileError(f'{where}: its input schema must be an object ("type": "object")')
    return ToolDef(name, description, {"type": "object", **schema})


def parse_choice(value: Any, names: list[str]) -> tuple[str, bool]:
    """A request's tool_choice in either API's words: (auto, any, none or a tool's name;
    whether it names one). OpenAI's "required" is any; its and the Messages API's objects
    name a tool or give the type."""
    if isinstance(value, dict):
        fn = value.get("function")
        if isinstance(fn, dict):
            value = {"type": "tool", "name": fn.get("name")}
        kind = value.get("type")
        value = value.get("name") if kind == "tool" else kind
    value = "any" if value == "required" else value
    if value in ("auto", "any", "none"):
        return value, False
    if value in names:
        return value, True
    raise ToolsFileError(
        f"tool_choice {json.dumps(value)} is not auto, any, none or an offered tool's name"
    )
