"""A closed loop has no plan to count beforehand, so it stops at the rows a run's analysis
holds (#44: 4,500,000 requests of a `constant-vus` load passed 2 GiB at the analysis)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import run_programmed
from zqbench.load import arrival_rate
from zqbench.pipeline import execute

VUS = """
name = "vus-bound"
description = "a closed loop longer than its bound"
api = "anthropic"
[load]
executor = "constant-vus"
vus = 4
duration = "20s"
graceful_stop = "2s"
[request]
max_tokens = 2
stream = true
timeout = "5s"
prompt_tokens = 8
"""
FAST = "x-program: /anthropic?n=2&every=1&first=1"


def test_a_closed_loop_stops_at_its_row_bound_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(execute, "MAX_PLANNED_REQUESTS", 60)
    notes: list[str] = []
    result, truth = run_programmed(tmp_path, VUS, FAST, on_target=notes.append)
    rows = pq.read_table(result.out_dir / "samples.parquet")
    assert rows.num_rows == 60  # every send has its row, and no more were sent
    assert sum(1 for key in truth["truth"] if key.startswith("zq-")) == 60  # the server's count
    assert rows.column("t_send").to_pylist()[-1] < 20e9  # it ended well before 20 s
    assert result.summary.load.stopped_at_bound == 60
    load = json.loads((result.out_dir / "summary.json").read_text())["load"]
    assert load["stopped_at_bound"] == 60
    assert (
        "the load stopped at 60 requests, before its end: "
        f"{arrival_rate.too_many(60)}give it a shorter duration, or fewer users"
    ) in notes


def test_a_run_within_its_bound_says_nothing_of_it(tmp_path: Path) -> None:
    notes: list[str] = []
    short = VUS.replace('"20s"', '"1s"')
    result, _ = run_programmed(tmp_path, short, FAST, on_target=notes.append)
    assert result.summary.load.stopped_at_bound is None
    load = json.loads((result.out_dir / "summary.json").read_text())["load"]
    assert "stopped_at_bound" not in load
    assert not [n for n in notes if "stopped at" in n]


def test_a_planned_load_is_never_cut_by_the_bound() -> None:
    """Each worker's share of a plan within MAX_PLANNED_REQUESTS is within its bound."""
    assert execute.max_sends(1) == arrival_rate.MAX_PLANNED_REQUESTS
    assert execute.max_sends(7) * 7 >= arrival_rate.MAX_PLANNED_REQUESTS
    assert execute.max_sends(7) == -(-arrival_rate.MAX_PLANNED_REQUESTS // 7)
