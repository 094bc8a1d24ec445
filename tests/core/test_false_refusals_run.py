"""A server that refuses every third request while idle: a third of the run's requests are
false refusals, request by request as the server's own truth says, and the SLO fails.

The programmed server counts every request it gets and refuses each third one at once
(503, Retry-After), whatever is in flight, and records how many of its streams were running
then. At 20 req/s with requests of about 11 ms, nothing else is in flight at most refusals:
zqbench must call exactly the refusals the server made with a slot free false.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import run_programmed
from zqbench.summary import FalseRefusals

SCENARIO = """
name = "refuses-a-third"
api = "anthropic"
[slo]
checks = ["false_refusals:rate<1%"]
[validity]
max_schedule_lag = "500ms"  # a busy shared machine's generator is not what is tested
[outcomes]
at_rest_probes = 0  # the server would refuse every third probe too
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "6s"
graceful_stop = "2s"
[request]
max_tokens = 4
prompt_tokens = 8
"""
PROGRAM = "x-program: /anthropic?n=4&every=2&first=5&head=1&refuse_every=3"
pytestmark = pytest.mark.slow


def test_every_third_refused_at_rest_reads_as_a_third_false_refusals(tmp_path: Path) -> None:
    result, everything = run_programmed(tmp_path, SCENARIO, PROGRAM)
    truth = everything["truth"]
    outcomes = result.summary.outcomes
    assert outcomes is not None
    section = outcomes.false_refusals
    assert isinstance(section, FalseRefusals)
    # Nothing stated (its /health is text), no /metrics: the run's own most-at-once.
    assert section.capacity.source == "estimate"
    assert section.capacity.value >= 1
    rows = pq.read_table(result.out_dir / "samples.parquet").to_pylist()
    assert len(rows) == 120
    refused_truth = {k: t for k, t in truth.items() if t["outcome"] == "refused"}
    refused_rows = [r for r in rows if r["status"] == 503]
    assert {f"zq-{r['request_id']}" for r in refused_rows} <= set(refused_truth)
    # The server's truth: a refusal with fewer streams running than the capacity is false.
    false_truth = {k for k, t in refused_truth.items() if t["in_flight"] < section.capacity.value}
    false_rows = {f"zq-{r['request_id']}" for r in rows if r["false_refusal"]}
    expected = false_truth & {f"zq-{r['request_id']}" for r in refused_rows}
    assert false_rows <= expected  # never an accusation the server's own count denies
    # The judgement is conservative: a client on a busy machine reads an admitted request's
    # end late, so its span covers a refusal the server made after that slot freed (one such
    # miss in a CI run, zq-37). Never more than two of the 40.
    assert len(expected - false_rows) <= 2, sorted(expected - false_rows)
    print(f"false refusals {section.count} of {section.refusals} ({section.rate:.1%} of 120)")
    assert 0.30 <= section.rate <= 0.37, section.rate
    assert section.count == len(false_rows)
    # The gate: the SLO fails on them, with the count in its message.
    (slo,) = result.summary.slos
    assert slo.metric == "false_refusals" and slo.verdict == "fail"
    assert f"({section.count:,} of 120)" in slo.message
    assert result.exit_code == 1
    saved = json.loads((result.out_dir / "summary.json").read_text())
    assert saved["outcomes"]["false_refusals"]["count"] == section.count
    assert (
        "False refusals (made while a slot was free)" in (result.out_dir / "summary.md").read_text()
    )
