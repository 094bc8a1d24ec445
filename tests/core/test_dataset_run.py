"""A dataset run end to end against the reference server: each row sent as it is written.

The reference server counts a prompt as BOS + the UTF-8 bytes of the system prompt and
every message joined with newlines, and always answers max_tokens tokens; so its usage
shows, row by row, that the conversation and the output length reached it unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import MODEL, zqbench_here
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.scenario import load_scenario
from zqbench.target.embedded import EmbeddedServer

ROOT = Path(__file__).resolve().parents[2]


def _expected_prompt_tokens(row: dict) -> int:
    if "prompt" in row:
        texts = [row["prompt"]]
    else:
        texts = [row["system"], *(m["content"] for m in row["messages"])]
    return 1 + len("\n".join(texts).encode())


@pytest.mark.slow
def test_the_bundled_dataset_scenario_sends_each_row_as_written(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    result = run_scenario(
        RunOptions.of(
            scenario="dataset",
            target=ref_server.base_url,
            model=MODEL,
            duration_scale=0.25,  # 5 s: about 50 requests
            out=tmp_path / "run",
            calibration="off",
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )
    rows = [
        json.loads(line) for line in (ROOT / "scenarios/data/chat.jsonl").read_text().splitlines()
    ]
    samples = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    assert len(samples) >= 30 and all(s["error"] is None for s in samples)
    assert len({s["source_row"] for s in samples}) == len(samples)  # no repeats under 200
    for s in samples:
        row = rows[s["source_row"]]
        assert s["output_tokens"] == row["output_tokens"], s
        assert s["prompt_tokens"] == _expected_prompt_tokens(row), s
    assert any("messages" in rows[s["source_row"]] for s in samples)
    shuffled = [s["source_row"] for s in sorted(samples, key=lambda s: s["request_id"])]
    assert shuffled != sorted(shuffled)  # order = "shuffle"
    source = result.summary.environment["request_source"]
    assert source["rows_in_file"] == 200 and source["order"] == "shuffle"
    assert source["path"] == "bundled:data/chat.jsonl"
    assert source["output_lengths"] == "not forced: the Messages API has no minimum output length"


def test_a_bad_dataset_on_the_command_line_is_exit_2_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": "b", "output_tokens": 0}\n')
    result = zqbench_here("run", "smoke", "--dataset", str(bad), "--target", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f'zqbench: error: dataset {bad} line 2: "output_tokens" is 0, not a positive integer; '
        "fix it or leave it out"
    ]
    missing = zqbench_here("run", "smoke", "--dataset", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2
    assert "--dataset" in missing.stderr and "no such file" in missing.stderr


def test_a_dataset_scenario_shows_its_source_in_the_config() -> None:
    config = load_scenario("dataset").to_dict()["request"]["dataset"]
    assert config == {
        "path": "bundled:data/chat.jsonl",
        "format": "auto",
        "order": "shuffle",
        "prompt_tokens": None,
        "output_tokens": [1, 128],
        "force_output": True,
    }
