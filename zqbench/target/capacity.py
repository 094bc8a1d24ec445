"""The capacity a target states: how many requests it computes at once, read from the
first of STATEMENTS that states one.

    GET /health                            `capacity`, `max_concurrency`, `max_num_seqs` or
                                           `slots` (the reference server's)
    GET /props                             `total_slots`: llama.cpp's server, its --parallel
    GET /get_server_info                   `max_running_requests`: SGLang's
    GET /server_info?config_format=json    `vllm_config.scheduler_config.max_num_seqs`: vLLM's,
                                           served only with VLLM_SERVER_DEV_MODE=1

A positive integer is taken as stated; anything else is no statement (the run then judges
by the target's running gauge or its own requests: zqbench.metrics.false_refusals). TGI's
`/info` is not read: its `max_concurrent_requests` caps requests queued and running alike,
and `max_batch_size` is usually null; its slots show in its running gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zqbench.summary import Capacity

HEALTH_PATH = "/health"
CAPACITY_FIELDS = ("capacity", "max_concurrency", "max_num_seqs", "slots")  # in /health


@dataclass(frozen=True, slots=True)
class Statement:
    """Where one kind of server states its capacity: a GET and the fields to look in."""

    path: str
    fields: tuple[str, ...]  # dotted paths into the JSON object; the first stated wins
    timeout_s: float = 2.0


STATEMENTS = (
    Statement(HEALTH_PATH, CAPACITY_FIELDS),
    Statement("/props", ("total_slots",)),
    Statement("/get_server_info", ("max_running_requests",)),
    # Its first answer gathers the host's environment: 1.9-3.2 s measured on one CPU core.
    Statement(
        "/server_info?config_format=json",
        ("vllm_config.scheduler_config.max_num_seqs",),
        timeout_s=10.0,
    ),
)


def _at(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(key)
    return doc


def stated(doc: Any, statement: Statement = STATEMENTS[0]) -> Capacity | None:
    """The capacity a JSON object (the answer to `statement`'s GET) states, if any."""
    if not isinstance(doc, Mapping):
        return None
    for name in statement.fields:
        value = _at(doc, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            where = statement.path.split("?")[0]
            return Capacity(value=value, source="stated", detail=f"{where} `{name}`")
    return None


def first_stated(
    get_json: Callable[[str, float], Any], health: Mapping[str, Any] | None = None
) -> Capacity | None:
    """The first statement of STATEMENTS a target makes; `get_json(path, timeout_s)` is its
    JSON answer to a GET (None, or raise, for none); `health`, /health's when already read."""
    for statement in STATEMENTS:
        if statement.path == HEALTH_PATH and health is not None:
            doc: Any = health
        else:
            try:
                doc = get_json(statement.path, statement.timeout_s)
            except Exception:  # most targets lack most of these paths, or answer oddly
                continue
        found = stated(doc, statement)
        if found is not None:
            return found
    return None
