"""Every request the run sends to the model's API is declared in summary.json (#44 item 8).

Besides the load, a run sends set-up requests: the API checks (`target_resolution.probes`)
and the at-rest probes (`outcomes.basis.at_rest`), whose first request opens their
connection and is not in the fit. The programmed server counts every request with a body
(a GET, a health check or a model listing, has none); summary.json must declare as many.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.conftest import run_programmed
from zqbench.summary import AtRest

pytestmark = pytest.mark.slow

SCENARIO = """
name = "set-up"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "0.5s"
[request]
max_tokens = 4
prompt_tokens = 8
[validity]
min_samples = 1
[outcomes]
at_rest_probes = 2
"""


def test_the_server_receives_what_the_summary_declares(tmp_path: Path) -> None:
    result, truth = run_programmed(tmp_path, SCENARIO, "x-program: /anthropic?n=2&every=1")
    received = [k for k, t in truth["truth"].items() if t["body_bytes"] > 0]
    summary = result.summary
    assert summary.target_resolution is not None and summary.outcomes is not None
    at_rest = summary.outcomes.basis.at_rest
    assert isinstance(at_rest, AtRest)
    assert at_rest.opener is not None  # answered, with its time, outside the fit
    assert at_rest.opener.size == 8  # the shortest prompt, as the first probes'
    assert [p.size for p in at_rest.probes] == [8, 8, 2048, 2048]
    api_checks = len(summary.target_resolution.probes)
    assert api_checks == 2  # both APIs: the scenario's is checked, the other detected
    declared = summary.requests.sent + api_checks + 1 + len(at_rest.probes)
    assert (summary.requests.sent, len(received)) == (5, declared)
    saved = json.loads((result.out_dir / "summary.json").read_text())
    assert saved["outcomes"]["basis"]["at_rest"]["opener"]["size"] == 8
