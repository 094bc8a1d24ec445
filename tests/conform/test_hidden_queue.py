"""zeroqueue.5 judges each concurrency step's tail: a server with vLLM's shape (N slots, a
queue beyond, never a refusal) fails it at the step past its slots, where the median still
looks like the endpoint at rest."""

from __future__ import annotations

import dataclasses

from tests.conform.fake_server import FakeServer
from tests.conform.util import fake_options, outcome
from zqbench.conform import ConformReport, run_conformance

OLD_TOLERANCE_MS = 3.0  # the median-slope rule this check replaced failed above this CI low


def _run(slots: int, steps: tuple[int, ...]) -> ConformReport:
    with FakeServer(queue=True, slots=slots) as srv:
        options = fake_options(
            srv.base_url,
            only=("zeroqueue",),
            slope_steps=steps,
            slope_max_tokens=32,  # a service time near 100 ms, far above the 20 ms margin
            overload_concurrency=16,
        )
        return run_conformance(options)


def test_a_queue_past_the_slots_fails_on_the_tail_where_the_median_hides_it() -> None:
    report = _run(slots=8, steps=(1, 2, 4, 8, 16))
    check = outcome(report, "zeroqueue.5")
    ev = check.evidence
    assert check.status == "fail", (check.reason, ev)
    assert check.reason.startswith("a hidden queue at concurrency 16: 24 of 48 requests (50%")
    assert ev["queueing_steps"] == [16]
    rows = {row["concurrency"]: row for row in ev["steps"]}
    assert [rows[c]["waited"] for c in (1, 2, 4, 8)] == [0, 0, 0, 0]
    at16 = rows[16]
    # 16 on 8 slots: exactly half wait a service time, none is refused.
    assert (at16["admitted"], at16["refused"], at16["waited"]) == (48, 0, 24), ev
    assert at16["waited_share"] == 0.5 and at16["waited_share_ci95"][0] > 0.3
    # The median still looks like the endpoint at rest; p90 and max sit a service time later.
    threshold = ev["threshold_ms"]
    assert at16["ttft_p50_ms"] < threshold < at16["ttft_p90_ms"] <= at16["ttft_max_ms"]
    assert at16["ttft_p90_ms"] - ev["baseline_ttft_ms"] > 0.8 * ev["hold_ms"]
    # ... so the old rule (the median slope's CI low above 3 ms) would have passed it.
    assert ev["median_slope"]["ci95_ms"][0] <= OLD_TOLERANCE_MS
    # vLLM advertises nothing; its running gauge tops out at the slot count.
    assert ev["capacity"] == {
        "value": 8,
        "source": "discovered: max vllm:num_requests_running during the steps",
    }
    assert ev["steps_added"] == []  # 16 is already twice the capacity


def test_nothing_refused_leaves_the_refusal_checks_nothing_to_judge() -> None:
    report = _run(slots=8, steps=(1, 2, 4, 8, 16))
    assert outcome(report, "zeroqueue.6").status == "fail"  # admitted, but after a wait
    for check_id in ("zeroqueue.7", "zeroqueue.8", "zeroqueue.9", "zeroqueue.10"):
        assert outcome(report, check_id).status == "skip", check_id
    assert outcome(report, "zeroqueue.10").reason == (
        "nothing was refused in the burst (see zeroqueue.6)"
    )


def test_a_discovered_capacity_adds_a_step_at_twice_it() -> None:
    report = _run(slots=4, steps=(1, 2, 6))
    ev = outcome(report, "zeroqueue.5").evidence
    assert ev["capacity"]["value"] == 4
    assert ev["steps_added"] == [8]
    assert [row["concurrency"] for row in ev["steps"]] == [1, 2, 6, 8]
    assert ev["queueing_steps"] == [6, 8]


def test_steps_that_never_pass_capacity_are_a_skip_not_a_pass() -> None:
    with FakeServer(queue=True, slots=8) as srv:
        options = fake_options(srv.base_url, only=("zeroqueue",), slope_steps=(1, 2, 4))
        report = run_conformance(dataclasses.replace(options, skip=("zeroqueue.6",)))
    check = outcome(report, "zeroqueue.5")
    assert check.status == "skip"
    assert check.reason == (
        "no step went past capacity (nothing refused up to 4 concurrent requests, "
        "capacity unknown): raise --slope-steps"
    )
