"""False refusals against ground truth: refusals made while fewer admitted requests were in
flight than the target's capacity, the capacity from the best source there is, and what
summary.json, samples.parquet's columns and the SLO gate say of them."""

from __future__ import annotations

import numpy as np
import pytest

from zqbench.metrics.classify import DEFAULT_RULES
from zqbench.metrics.false_refusals import most_at_once
from zqbench.metrics.slo import Evidence, evaluate_slo, parse_slo
from zqbench.metrics.summarize import run_frame, summarize
from zqbench.summary import (
    Capacity,
    FalseRefusals,
    GaugeSummary,
    OutcomeBasis,
    QueueSeries,
    ServerQueue,
    Unavailable,
)

from .conftest import MS, build_samples
from .test_outcomes import AT_REST_10MS
from .test_summary import run_info

EVIDENCE = Evidence(duration_s=10.0)
STATED_2 = Capacity(value=2, source="stated", detail="/health `slots`")


def spans(rows: list[tuple[float, float, int]], **columns):  # type: ignore[no-untyped-def]
    """Requests from (send ms, end ms, status) rows; 2xx ones streamed from half-way."""
    send = np.array([r[0] for r in rows]) * MS
    end = np.array([r[1] for r in rows]) * MS
    status = [r[2] for r in rows]
    return build_samples(
        [r[1] - r[0] for r in rows],
        t_send=send.astype(np.int64),
        t_intended=send.astype(np.int64),
        t_headers=send.astype(np.int64),
        t_first_token=((send + end) / 2).astype(np.int64),
        t_end=end.astype(np.int64),
        status=status,
        error=[None if s == 200 else f"http_{s}" for s in status],
        **columns,
    )


def judged(samples, capacity: Capacity | None = STATED_2, server_queue=None):  # type: ignore[no-untyped-def]
    basis = OutcomeBasis(rules=DEFAULT_RULES, at_rest=AT_REST_10MS, capacity=capacity)
    info = run_info(outcome_basis=basis, server_queue=server_queue)
    frame = run_frame(samples, info)
    assert frame.outcomes is not None
    summary = summarize(samples, run=info, slos=[])
    assert summary.outcomes is not None
    return frame, summary.outcomes.false_refusals


def test_a_refusal_is_false_only_while_fewer_than_capacity_admitted_requests_are_in_flight() -> (
    None
):
    rows = [
        (0, 1000, 200),  # A: in flight the whole second
        (100, 400, 200),  # B
        (200, 201, 503),  # A and B in flight: full, honest
        (500, 501, 503),  # B ended at 400 ms: only A, a slot free -> false
        (410, 411, 503),  # B ended 10 ms before: within the 20 ms grace, counted -> honest
        (1200, 1201, 529),  # nothing in flight -> false
    ]
    frame, section = judged(spans(rows))
    assert frame.outcomes is not None
    refusals = frame.outcomes.refusals
    assert list(refusals.false) == [False, False, False, True, False, True]
    occupancy = refusals.occupancy
    assert np.isnan(occupancy[:2]).all()
    assert list(occupancy[2:]) == [2, 1, 2, 0]
    assert isinstance(section, FalseRefusals)
    assert section.capacity == STATED_2
    assert (section.refusals, section.count) == (4, 2)
    assert section.rate == pytest.approx(2 / 6)
    assert section.share_of_refusals == pytest.approx(0.5)
    assert section.t == pytest.approx([0.5, 1.2])  # in send order
    assert section.occupancy == [1, 0]
    assert section.by_stage["0"].refusals == 4 and section.by_stage["0"].false == 2
    columns = frame.outcomes.columns()
    assert list(columns["false_refusal"]) == list(refusals.false)


def test_a_server_refusing_every_third_request_at_rest_has_a_third_false() -> None:
    # One request every 100 ms, each 20 ms long: never more than one in flight, capacity 4.
    rows = [
        (i * 100, i * 100 + (1 if i % 3 == 2 else 20), 503 if i % 3 == 2 else 200)
        for i in range(300)
    ]
    _, section = judged(spans(rows), Capacity(value=4, source="stated", detail="/health `slots`"))
    assert isinstance(section, FalseRefusals)
    assert section.count == 100 and section.refusals == 100
    assert section.rate == pytest.approx(1 / 3)


def test_without_a_stated_capacity_the_most_admitted_at_once_is_the_estimate() -> None:
    # Three at once from 0 to 300 ms; a refusal at 100 ms is honest, one at 500 ms is not.
    rows = [(0, 300, 200), (1, 301, 200), (2, 302, 200), (100, 101, 503), (500, 501, 503)]
    _, section = judged(spans(rows), capacity=None)
    assert isinstance(section, FalseRefusals)
    assert section.capacity == Capacity(
        value=3, source="estimate", detail="the most requests this run had admitted at once"
    )
    assert section.count == 1 and section.t == pytest.approx([0.5])


def test_the_estimate_does_not_count_a_turnovers_two_requests_in_transit_together() -> None:
    # Back to back on one slot: each next request is sent 2 ms before the last one's end
    # reached the client (the server had freed the slot already). One slot, not two.
    send = np.arange(50) * 100.0 * MS
    end = send + 102.0 * MS
    assert most_at_once(send, end, 20 * MS) == 1
    assert most_at_once(send, end, 0.0) == 2  # untrimmed, the turnovers overlap


def test_the_running_gauge_gives_the_capacity_and_clears_a_refusal_it_saw_full() -> None:
    # The gauge peaked at 2; at 0.5 s (a refusal with nothing of this run in flight) the
    # scrapes on both sides read 2: another client filled the server. At 2.0 s they read 0.
    rows = [(0, 300, 200), (1, 301, 200), (500, 501, 503), (2000, 2001, 503)]
    queue = ServerQueue(
        engine="refserver",
        engine_name="the reference server",
        url="http://127.0.0.1:1/metrics",
        found_by="discovery",
        scrapes=5,
        waiting=GaugeSummary(metric="refserver_num_requests_waiting", mean=0.0, max=0.0),
        running=GaugeSummary(metric="refserver_num_requests_running", mean=1.0, max=2.0),
        queue_time=Unavailable(unavailable="not exported"),
        over_time=QueueSeries(
            t=[0.1, 0.45, 0.55, 1.9, 2.1],
            waiting=[0.0] * 5,
            running=[2.0, 2.0, 2.0, 0.0, 0.0],
        ),
    )
    _, section = judged(spans(rows), capacity=None, server_queue=queue)
    assert isinstance(section, FalseRefusals)
    assert section.capacity.source == "running_gauge"
    assert section.capacity.value == 2
    assert section.capacity.detail == "max refserver_num_requests_running over the run"
    assert section.count == 1 and section.t == pytest.approx([2.0])


def test_nothing_admitted_and_nothing_stated_leaves_them_unavailable() -> None:
    frame, section = judged(spans([(0, 1, 503), (10, 11, 503)]), capacity=None)
    assert section == Unavailable(
        unavailable="no request was admitted and the target stated no capacity: "
        "nothing to judge refusals by"
    )
    result = evaluate_slo(parse_slo("false_refusals:rate<0.01"), frame, EVIDENCE)
    assert result.verdict == "inconclusive"
    assert "no capacity to judge refusals by" in result.message


def test_the_false_refusals_slo_is_judged_over_every_request() -> None:
    rows = [
        (i * 100, i * 100 + (1 if i % 3 == 2 else 20), 503 if i % 3 == 2 else 200)
        for i in range(300)
    ]
    frame, _ = judged(spans(rows))
    failing = evaluate_slo(parse_slo("false_refusals:rate<0.01"), frame, EVIDENCE)
    assert failing.verdict == "fail"
    assert failing.value == pytest.approx(1 / 3)
    passing = evaluate_slo(parse_slo("false_refusals:rate<50%"), frame, EVIDENCE)
    assert passing.verdict == "pass"
