"""The trivial loopback target of benchmarks/loadgen.py: answers at once, no model.

An RSGI app for granian (the fastest server measured here), returning a fixed
Anthropic Messages body, so zqbench parses it exactly as it would a real one.
Run: granian --interface rsgi --http auto --workers 1 --runtime-threads 1 \
         --no-access-log benchmarks.trivial_server:app --port 8001
"""

from __future__ import annotations

import json
from typing import Any

BODY = json.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "bench",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 8, "output_tokens": 1},
    },
    separators=(",", ":"),
).encode()
HEADERS = [("content-type", "application/json")]


async def app(scope: Any, proto: Any) -> None:
    if scope.proto != "http":
        return
    await proto()  # read (and discard) the request body
    proto.response_bytes(200, HEADERS, BODY)
