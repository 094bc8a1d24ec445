"""Writes chat.jsonl, the bundled dataset scenario's rows (made here, never downloaded).

    python scenarios/data/make_chat.py    # rewrites scenarios/data/chat.jsonl, byte for byte

200 rows of the JSONL dataset format (docs/workloads.md): most a single `prompt`, some a
`system` prompt and earlier turns in `messages`; each asks for an `output_tokens` length.
Prompt lengths follow a long-tailed (log-normal) spread, as real chat prompts do.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = [
    "queue",
    "latency",
    "server",
    "request",
    "token",
    "batch",
    "slot",
    "refuse",
    "admit",
    "prefill",
    "decode",
    "cache",
    "prefix",
    "tail",
    "median",
    "burst",
    "load",
    "stream",
    "answer",
    "model",
    "engine",
    "kernel",
    "memory",
    "shape",
    "step",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "?"


def rows(n: int = 200, seed: int = 2026) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(n):
        words = max(3, min(400, int(rng.lognormvariate(3.0, 0.9))))
        output = max(4, min(128, int(rng.lognormvariate(3.2, 0.6))))
        if i % 8 == 7:
            out.append({
                "system": "Answer in one short paragraph.",
                "messages": [
                    {"role": "user", "content": _text(rng, 12)},
                    {"role": "assistant", "content": _text(rng, 20)},
                    {"role": "user", "content": _text(rng, words)},
                ],
                "output_tokens": output,
            })  # fmt: skip
        else:
            out.append({"prompt": _text(rng, words), "output_tokens": output})
    return out


if __name__ == "__main__":
    path = Path(__file__).with_name("chat.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    print(f"wrote {path}")
