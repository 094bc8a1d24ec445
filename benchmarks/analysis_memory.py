"""A run of N requests, killed before its analysis, made from a real run's samples: what
`zqbench report` then analyses and renders whole (zqbench.saved.recover), the run's own
analysis stage, so that its peak RSS can be measured at any size.

    .venv/bin/python benchmarks/analysis_memory.py RUN_DIR --rows 3600000 --out /tmp/big
    /usr/bin/time -v .venv/bin/zqbench report /tmp/big     # "Maximum resident set size"

RUN_DIR is a finished run (summary.json and samples.parquet). Its samples are repeated,
each copy's times and ids shifted past the one before, into one worker's sample stream of
N rows in batches of 5,000 (a 10,000 req/s run's flushes, one each half second); its summary
becomes run-start.json, so the outcomes are judged as the run judged them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zqbench.outputs.json_out import load_summary
from zqbench.outputs.start_record import write_start
from zqbench.samples.sample import ARROW_SCHEMA
from zqbench.samples.writer import load_samples, stream_path
from zqbench.saved.run import run_info

BATCH = 5_000
CLIENT_TIMES = ("t_intended", "t_send", "t_headers", "t_first_token", "t_first_answer")
CLIENT_TIMES += ("t_last_token", "t_end")
SERVER_TIMES = ("srv_received", "srv_dispatch", "srv_start")


def shifted(base: pa.Table, copy: int, span_ns: int) -> pa.Table:
    """The copy-th repeat of `base`: ids after the copies before it, times `span_ns` later."""
    columns = []
    for field in ARROW_SCHEMA:
        column = base[field.name]
        if field.name == "request_id":
            column = pc.add(column, copy * base.num_rows)
        elif field.name in CLIENT_TIMES:
            column = pc.add(column, pa.scalar(copy * span_ns, pa.int64()))
        elif field.name in SERVER_TIMES:
            column = pc.add(column, copy * span_ns / 1e9)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run's folder")
    parser.add_argument("--rows", type=int, default=3_600_000)
    parser.add_argument("--out", type=Path, required=True, help="a new folder")
    args = parser.parse_args()
    summary = load_summary(args.run / "summary.json")
    base = load_samples(args.run).select(ARROW_SCHEMA.names).cast(ARROW_SCHEMA)
    base = base.sort_by([("request_id", "ascending")])
    span_ns = int(pc.max(base["t_end"]).as_py()) + 1
    args.out.mkdir(parents=True)
    copies = -(-args.rows // base.num_rows)
    path = stream_path(args.out, 0)
    with pa.OSFile(str(path), "wb") as f, ipc.new_stream(f, ARROW_SCHEMA) as out:
        for copy in range(copies):
            part = shifted(base, copy, span_ns)
            part = part.slice(0, min(part.num_rows, args.rows - copy * base.num_rows))
            out.write_table(part, max_chunksize=BATCH)
    # What the run knew at its t = 0: its summary's record less what the load reported.
    info = dataclasses.replace(run_info(summary), server_queue=None, stop=None, packet_loss=None)
    write_start(args.out, info, [slo.expr for slo in summary.slos])
    print(f"{args.out}: {args.rows:,} requests, {copies:,} copies of {base.num_rows:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
