"""Capacity, advertised or discovered, and the step added past it."""

from __future__ import annotations

from zqbench.conform.capacity import MAX_CONCURRENCY, Capacity, advertised, running
from zqbench.conform.phases import past

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 5.0
vllm:num_requests_running{engine="1",model_name="tiny"} 3.0
vllm:num_requests_running_total_bogus 99
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
vllm:num_requests_waiting{engine="0",model_name="tiny"} 8.0
"""


def _health_only(doc: object) -> object:
    return lambda path, _: doc if path == "/health" else None


def test_health_fields_advertise_a_capacity() -> None:
    assert advertised(_health_only({"status": "healthy", "slots": 4})) == Capacity(
        4, "advertised by /health `slots`"
    )
    assert advertised(_health_only({"max_concurrency": 16, "slots": 4})) == Capacity(
        16, "advertised by /health `max_concurrency`"
    )
    for nothing in (None, "", [], {"slots": 0}, {"slots": True}, {"slots": "8"}, {"x": 1}):
        assert advertised(_health_only(nothing)) is None


def test_the_running_gauge_is_summed_over_engines() -> None:
    assert running(VLLM_METRICS) == ("vllm:num_requests_running", 8.0)
    assert running("refserver_num_requests_running 3.0\n") == (
        "refserver_num_requests_running",
        3.0,
    )
    assert running("# nothing here\nother_metric 1\n") is None


def test_one_step_is_added_at_twice_the_capacity() -> None:
    cap = Capacity(8, "advertised by /health `slots`")
    assert past((1, 2, 4), cap) == (1, 2, 4, 16)
    assert past((1, 2, 4, 8, 16, 32), cap) == (1, 2, 4, 8, 16, 32)
    assert past((1, 2, 4), None) == (1, 2, 4)
    huge = Capacity(10_000, "advertised by /health `capacity`")
    assert past((1, 2), huge) == (1, 2, MAX_CONCURRENCY)
