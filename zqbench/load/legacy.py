"""Saved summaries from before the executor protocol: their load section said
`"open_loop": true|false`; it now says `"loop": "open"|"closed"`, the executor's own word.
Read-side only: zqbench writes the new key, and `zqbench report`, `gate` and `compare` still
read runs saved earlier."""

from __future__ import annotations

from typing import Any


def upgrade_summary(data: Any) -> Any:
    """`data` (a parsed summary.json) with an old load section rewritten; else unchanged."""
    load = data.get("load") if isinstance(data, dict) else None
    if isinstance(load, dict) and "open_loop" in load and "loop" not in load:
        old = load.pop("open_loop")
        upgraded = {"loop": "open" if old is True else "closed" if old is False else old}
        data["load"] = {**upgraded, **load}
    return data
