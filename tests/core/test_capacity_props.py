"""A target that states its slots elsewhere than /health (llama.cpp's GET /props
`total_slots`, SGLang's /get_server_info, vLLM's /server_info in its dev mode): `zqbench run`
and conform take the capacity from the first that states one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conform.fake_server import MODEL, FakeServer
from tests.core.conftest import write_scenario
from zqbench.conform import capacity as conform_capacity
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.summary import Capacity
from zqbench.target.capacity import STATEMENTS, first_stated, stated

PROPS, SGLANG, VLLM = STATEMENTS[1:]

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
    assert stated(props, PROPS) == found


def test_sglang_and_vllm_state_their_running_limit() -> None:
    sglang = {"max_running_requests": 48, "max_total_num_tokens": 9000, "dp_size": 1}
    assert stated(sglang, SGLANG) == Capacity(
        value=48, source="stated", detail="/get_server_info `max_running_requests`"
    )
    assert stated({"max_running_requests": None}, SGLANG) is None  # SGLang's "auto"
    vllm = {"vllm_config": {"scheduler_config": {"max_num_seqs": 4, "max_num_queued_reqs": 4}}}
    detail = "/server_info `vllm_config.scheduler_config.max_num_seqs`"
    assert stated(vllm, VLLM) == Capacity(value=4, source="stated", detail=detail)
    assert stated({"vllm_config": "VllmConfig(...)"}, VLLM) is None  # the text format


def test_health_is_read_first_and_each_statement_after_it_in_turn() -> None:
    answers = {
        "/health": {"status": "ok"},
        "/props": {"total_slots": 4},
        "/get_server_info": {"max_running_requests": 48},
    }
    asked: list[str] = []

    def get_json(path: str, _: float) -> object:
        asked.append(path)
        if path == "/get_server_info":
            raise OSError("a 404 or a reset: no statement, the next is asked")
        return answers.get(path)

    found = conform_capacity.advertised(get_json)
    assert found == conform_capacity.Capacity(4, "advertised by /props `total_slots`")
    assert asked == ["/health", "/props"]
    del answers["/props"]
    asked.clear()
    assert first_stated(get_json) is None
    assert asked == ["/health", "/props", "/get_server_info", "/server_info?config_format=json"]
    # /health already read (the run reads it first) is not asked again.
    assert first_stated(get_json, {"slots": 8}) == Capacity(
        value=8, source="stated", detail="/health `slots`"
    )


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
                html=False,  # nothing here reads report.html (~3 s of CPU a run)
            )
        )
    outcomes = result.summary.outcomes
    assert outcomes is not None
    assert outcomes.basis.capacity == Capacity(
        value=3, source="stated", detail="/props `total_slots`"
    )
