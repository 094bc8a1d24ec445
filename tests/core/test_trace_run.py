"""A trace replay end to end against the reference server: each row at its time and length.

The reference server counts a prompt as BOS + one token per byte and always answers
max_tokens tokens, so with calibration off its usage shows each row's lengths exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.core.conftest import MODEL, zqbench_here
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_trace_is_replayed_row_by_row_at_its_times(tmp_path: Path) -> None:
    # A server of its own with 64 slots: every row must be served, and the worker's shared
    # 16-slot server refused one (529) in a full run, its slots still held by earlier tests'
    # streams on a busy machine.
    with EmbeddedServer(engine="sim", max_batch_size=64) as server:
        result = run_scenario(
            RunOptions.of(
                scenario="trace",
                target=server.base_url,
                model=MODEL,
                rate_scale=8.0,  # 8x faster
                duration_scale=0.5,  # the first half: 91 rows in 2.4 s
                out=tmp_path / "run",
                calibration="off",
                min_samples=50,
                html=False,  # nothing here reads report.html (~3 s of CPU a run)
            )
        )
    rows = [json.loads(x) for x in (ROOT / "scenarios/data/trace.jsonl").read_text().splitlines()]
    samples = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    source = result.summary.environment["request_source"]
    assert len(samples) == source["rows_scheduled"] == 91
    assert source["time_scale"] == 0.125 and source["path"] == "bundled:data/trace.jsonl"
    assert 0.4 < source["ideal_reuse"] < 0.45
    t0 = rows[0]["timestamp"]
    for s in sorted(samples, key=lambda s: s["request_id"]):
        row = rows[s["request_id"]]
        assert s["error"] is None and s["source_row"] == s["request_id"]
        assert (s["prompt_tokens"], s["output_tokens"]) == (
            row["input_length"],
            row["output_length"],
        )
        assert s["t_intended"] == round((row["timestamp"] - t0) * 1e6 / 8)
    assert result.summary.load.offered_requests == 91


def test_a_bad_trace_is_exit_2_in_one_line_before_the_target(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]}\n'
        '{"timestamp": 9, "input_length": 10, "output_length": -4, "hash_ids": [3]}\n'
    )
    scenario = tmp_path / "t.toml"
    scenario.write_text('name = "t"\n[load]\nexecutor = "trace"\ntrace = "t.jsonl"\n')
    result = zqbench_here("run", str(scenario), "--target", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"zqbench: error: trace {tmp_path / 't.jsonl'} line 2: output_length = -4 must be a "
        "whole number of tokens >= 1; fix it"
    ]
