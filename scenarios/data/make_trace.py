"""Writes trace.jsonl, the bundled trace scenario's requests (made here, never downloaded).

    python scenarios/data/make_trace.py                  # rewrites scenarios/data/trace.jsonl
    python scenarios/data/make_trace.py --rows 10000000 --rate 1000 --out /tmp/big.jsonl

Rows in mooncake's format (docs/workloads.md): `timestamp` (ms), `input_length`,
`output_length`, `hash_ids`, one id per block of `--block-tokens` prompt tokens. Arrivals
are Poisson at `--rate` (or evenly spaced, `--arrivals uniform`), stamped in whole
milliseconds as mooncake's are (`--decimals 3` keeps microseconds: at 1000 req/s whole
milliseconds bunch arrivals into one instant).
Reuse follows a simple model of chat and agent traffic: a new request either continues an
earlier one (its first k full blocks, k drawn uniformly, then blocks of its own) or starts
afresh, and earlier requests are picked with a bias towards recent ones. Ids are numbered
in order of first use, as mooncake's are; a request's last, partial block gets an id no
other request uses, since its text ends inside the block.
The same arguments write the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write(
    out: Path,
    rows: int,
    rate: float,
    block_tokens: int,
    max_blocks: int,
    seed: int,
    decimals: int,
    poisson: bool = True,
) -> None:
    rng = random.Random(seed)
    chains: list[list[int]] = []  # each earlier request's full blocks, for reuse
    next_id = 0
    t_ms = 0.0
    with out.open("w") as f:
        for _ in range(rows):
            t_ms += (rng.expovariate(rate) if poisson else 1 / rate) * 1000.0
            ids: list[int] = []
            if chains and rng.random() < 0.7:
                # Recent requests are likelier to be continued (a conversation's next turn).
                parent = chains[max(0, len(chains) - 1 - int(rng.expovariate(1 / 8)))]
                ids = parent[: rng.randint(1, len(parent))] if parent else []
            fresh = rng.randint(1, max(1, max_blocks - len(ids)))
            for _ in range(fresh):
                ids.append(next_id)
                next_id += 1
            partial = rng.randint(0, block_tokens - 1)  # tokens short of the last block
            if partial:
                chains.append(ids[:-1])  # the partial block's text is this request's only
            else:
                chains.append(list(ids))
            if len(chains) > 4096:
                chains = chains[-2048:]
            row = {
                "timestamp": round(t_ms, decimals) if decimals else round(t_ms),
                "input_length": len(ids) * block_tokens - partial,
                "output_length": rng.randint(8, 64),
                "hash_ids": ids,
            }
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=160)
    p.add_argument("--rate", type=float, default=4.0, help="mean requests per second")
    p.add_argument("--block-tokens", type=int, default=128)
    p.add_argument("--max-blocks", type=int, default=6, help="blocks of the longest prompt")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path, default=HERE / "trace.jsonl")
    p.add_argument("--decimals", type=int, default=0, help="of the timestamps, in ms")
    p.add_argument("--arrivals", choices=("poisson", "uniform"), default="poisson")
    a = p.parse_args()
    poisson = a.arrivals == "poisson"
    write(a.out, a.rows, a.rate, a.block_tokens, a.max_blocks, a.seed, a.decimals, poisson)


if __name__ == "__main__":
    main()
