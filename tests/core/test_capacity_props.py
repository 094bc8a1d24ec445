"""A target that states its slots in GET /props (llama.cpp's server: `total_slots`), not in
/health: `zqbench run` and conform take the capacity from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conform.fake_server import MODEL, FakeServer
from tests.core.conftest import write_scenario
from zqbench.conform import capacity as conform_capacity
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.summary import Capacity
from zqbench.target.capacity import stated, stated_by_props

QUICK = """
name = "props"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "1s"
graceful_stop = "2s"
[request]
max_tokens = 4
prompt_tokens = 8
[validity]
min_samples = 5
max_schedule_lag = "500ms"
[outcomes]
at_rest_probes = 1
"""


@pytest.mark.parametrize(
    ("props", "found"),
    [
        ({"total_slots": 4}, Capacity(value=4, source="stated", detail="/props `total_slots`")),
        ({"total_slots": 0}, None),
        ({"total_slots": True}, None),
        ({"total_slots": "4"}, None),
        ({"slots": 4}, None),  # /health's names are not /props'
        (None, None),
        ([4], None),
    ],
)
def test_props_states_total_slots_only(props: object, found: Capacity | None) -> None:
    assert stated_by_props(props) == found  # type: ignore[arg-type]


def test_health_is_read_first_and_props_second() -> None:
    assert stated({"slots": 8}) == Capacity(value=8, source="stated", detail="/health `slots`")
    both = conform_capacity.advertised({"slots": 8}, {"total_slots": 4})
    assert both == conform_capacity.Capacity(8, "advertised by /health `slots`")
    props = conform_capacity.advertised({"status": "ok"}, {"total_slots": 4})
    assert props == conform_capacity.Capacity(4, "advertised by /props `total_slots`")


def test_conform_watches_every_engines_running_gauge() -> None:
    assert "llamacpp:requests_processing" in conform_capacity.RUNNING_GAUGES
    assert "vllm:num_requests_running" in conform_capacity.RUNNING_GAUGES


@pytest.mark.slow
def test_a_run_takes_the_capacity_props_states(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, QUICK)
    with FakeServer(props=True, slots=3) as server:
        result = run_scenario(
            RunOptions.of(
                scenario=str(path),
                target=server.base_url,
                model=MODEL,
                out=tmp_path / "run",
                calibration="off",
            )
        )
    outcomes = result.summary.outcomes
    assert outcomes is not None
    assert outcomes.basis.capacity == Capacity(
        value=3, source="stated", detail="/props `total_slots`"
    )
