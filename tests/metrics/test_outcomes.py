"""Each request's outcome against ground truth: served, queued, refused fast or slow, and the
rest; the evidence that decided it, the bound, and the counts summary.json keeps."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from zqbench.load.spans import StageInfo
from zqbench.metrics.classify import (
    ANSWERS,
    DEFAULT_RULES,
    OUTCOMES,
    REFUSALS,
    Answer,
    answer_of,
)
from zqbench.metrics.summarize import run_frame, summarize
from zqbench.saved.run import run_info as saved_run_info
from zqbench.summary import AtRest, AtRestProbe, OutcomeBasis, Summary, Unavailable
from zqbench.target.at_rest import fit

from .conftest import MS, build_samples
from .test_summary import run_info

AT_REST_10MS = AtRest(
    probes=[AtRestProbe(size=32, prompt_tokens=32, ttft=0.010)] * 3,
    base=0.010,
    slope=0.0,
    spread=0.0,
)
NO_BASELINE = Unavailable(unavailable="[outcomes] at_rest_probes = 0: no baseline was measured")


def basis(at_rest: AtRest | Unavailable = AT_REST_10MS) -> OutcomeBasis:
    return OutcomeBasis(rules=DEFAULT_RULES, at_rest=at_rest)


def judged(samples, at_rest: AtRest | Unavailable = AT_REST_10MS, **run):
    info = run_info(outcome_basis=basis(at_rest), **run)
    frame = run_frame(samples, info)
    assert frame.outcomes is not None
    return frame.outcomes, summarize(samples, run=info, slos=[])


def timed(ttft_ms, hold_ms, **columns):
    """Successful requests, 10 ms apart, with the given TTFT and time streamed after it."""
    ttft = np.asarray(ttft_ms, dtype=np.float64)
    latency = ttft + np.asarray(hold_ms, dtype=np.float64)
    t_send = (np.arange(len(ttft)) * 10 * MS).astype(np.int64)
    return build_samples(
        list(latency), t_first_token=t_send + (ttft * MS).astype(np.int64), **columns
    )


def test_the_servers_headers_decide_first_at_the_5ms_bound() -> None:
    # srv_received 100 s after the epoch; dispatch 1 ms, 4.9 ms, 5.1 ms and 40 ms later.
    waits = [0.001, 0.0049, 0.0051, 0.040]
    samples = timed(
        [500.0] * 4,  # a TTFT that would read as queued: the headers outrank it
        [100.0] * 4,
        srv_received=[100.0] * 4,
        srv_dispatch=[100.0 + w for w in waits],
    )
    outcomes, summary = judged(samples)
    assert list(outcomes.names()) == ["served", "served", "queued", "queued"]
    cols = outcomes.columns()
    assert list(cols["outcome_evidence"]) == ["server_queue"] * 4
    assert cols["outcome_measure_s"] == pytest.approx(waits)
    assert list(cols["outcome_bound_s"]) == [0.005] * 4
    assert summary.outcomes is not None
    assert summary.outcomes.counts["served"] == 2 and summary.outcomes.counts["queued"] == 2
    assert summary.outcomes.admitted_queued_share == 0.5
    assert summary.outcomes.evidence["server_queue"] == 4


def test_without_headers_ttft_is_judged_against_twice_the_at_rest_ttft_plus_half_the_hold() -> None:
    # At rest 10 ms; hold 100 ms everywhere -> T = 2 * 10 + max(20, 100 / 2) = 70 ms.
    samples = timed([12.0, 69.0, 71.0, 400.0], [100.0] * 4)
    outcomes, summary = judged(samples)
    assert list(outcomes.names()) == ["served", "served", "queued", "queued"]
    assert outcomes.hold_s == pytest.approx(0.100)
    assert list(outcomes.columns()["outcome_bound_s"]) == pytest.approx([0.070] * 4)
    assert summary.outcomes is not None and summary.outcomes.evidence["ttft"] == 4
    assert summary.outcomes.hold == pytest.approx(0.100)


def test_the_margin_floors_the_allowance_when_the_hold_is_short() -> None:
    # Hold 10 ms: half of it (5 ms) is under the 20 ms margin -> T = 20 + 20 = 40 ms.
    samples = timed([39.0, 41.0], [10.0, 10.0])
    outcomes, _ = judged(samples)
    assert list(outcomes.names()) == ["served", "queued"]
    assert list(outcomes.columns()["outcome_bound_s"]) == pytest.approx([0.040, 0.040])


def test_a_long_prompt_is_allowed_its_longer_prefill_at_rest() -> None:
    # At rest: 10 ms + 0.1 ms per prompt token (fitted from probes at 32 and 1032 tokens).
    at_rest = fit(
        [AtRestProbe(size=32, prompt_tokens=32, ttft=0.0132)] * 3
        + [AtRestProbe(size=1032, prompt_tokens=1032, ttft=0.1132)] * 3
    )
    assert at_rest.base == pytest.approx(0.010) and at_rest.slope == pytest.approx(1e-4)
    # 1000-token prompts, TTFT 200 ms: T = 2 * (10 + 100) + 50 = 270 ms, served; the same
    # TTFT on a 32-token prompt is past T = 2 * 13.2 + 50 = 76.4 ms: queued.
    samples = timed([200.0, 200.0], [100.0, 100.0], prompt_tokens=[1000, 32])
    outcomes, _ = judged(samples, at_rest)
    assert list(outcomes.names()) == ["served", "queued"]
    assert list(outcomes.columns()["outcome_bound_s"]) == pytest.approx([0.270, 0.0764])


def test_refusals_are_fast_until_they_take_as_long_as_waiting_for_a_slot() -> None:
    # Three served (hold 100 ms), then refusals after 5 ms, 69 ms, 71 ms and 2 s.
    # Bound: max(20 ms, 100 / 2 ms) + 2 * 10 ms at rest = 70 ms.
    served = timed([12.0] * 3, [100.0] * 3)
    refused = build_samples([5.0, 69.0, 71.0, 2000.0], status=503, error="http_503")
    refused["t_first_token"] = None
    samples = _concat(served, refused)
    outcomes, summary = judged(samples)
    names = list(outcomes.names())
    assert names[3:] == ["refused_fast", "refused_fast", "refused_slow", "refused_slow"]
    assert list(outcomes.columns()["outcome_evidence"])[3:] == ["time_to_reject"] * 4
    assert list(outcomes.columns()["outcome_bound_s"])[3:] == pytest.approx([0.070] * 4)
    assert summary.outcomes is not None and summary.outcomes.refusals_slow_share == 0.5


def test_a_refusal_in_disguise_is_its_own_outcome_counted_as_a_refusal() -> None:
    """A 200 whose stream carried an overload error before any token (the parser's
    refused_in_stream) is refused_in_stream however long it took: judged by time_to_reject
    with no bound, a refusal in every count, never served or failed."""
    served = timed([12.0] * 3, [100.0] * 3)
    fast = build_samples([4.0], status=503, error="http_503")
    disguised = build_samples([5.0, 2000.0], status=200, error="refused_in_stream")
    broken = build_samples([7.0], status=200, error="stream_overloaded_error")
    late = build_samples([9.0], status=500, error="refused_in_stream")  # no 2xx: not one
    samples = _concat(served, fast, disguised, broken, late)
    samples.loc[3:, "t_first_token"] = None
    outcomes, summary = judged(samples)
    assert list(outcomes.names()) == [
        "served", "served", "served", "refused_fast", "refused_in_stream", "refused_in_stream",
        "failed", "failed",
    ]  # fmt: skip
    cols = outcomes.columns()
    assert list(cols["outcome_evidence"])[3:6] == ["time_to_reject"] * 3
    assert cols["outcome_measure_s"][4:6] == pytest.approx([0.005, 2.0])
    assert np.isnan(cols["outcome_bound_s"][4:6]).all()
    assert list(outcomes.refused) == [False] * 3 + [True] * 3 + [False] * 2
    out = summary.outcomes
    assert out is not None
    assert out.counts["refused_in_stream"] == 2 and out.counts["failed"] == 2
    assert out.refusals_slow_share == 0.0  # none slow of 3 refusals
    assert out.evidence["time_to_reject"] == 3
    assert not isinstance(out.false_refusals, Unavailable) and out.false_refusals is not None
    assert out.false_refusals.refusals == 3
    assert summary.status_codes == {
        "200": 3, "200:refused_in_stream": 2, "503": 1, "200:stream_overloaded_error": 1,
        "500:refused_in_stream": 1,
    }  # fmt: skip
    reject = summary.metrics["time_to_reject"]
    assert reject.n == 3 and reject.p99 == pytest.approx(2.0)
    assert not isinstance(summary.retry_after, Unavailable)
    assert summary.retry_after.refusals == 3
    assert summary.requests.ok == 3


def test_the_answer_of_one_sample() -> None:
    assert answer_of(200, "refused_in_stream") == Answer.REFUSED_IN_STREAM
    assert ANSWERS[Answer.REFUSED_IN_STREAM] == "refused_in_stream"
    assert set(REFUSALS) == {Answer.REFUSED, Answer.REFUSED_IN_STREAM}
    assert answer_of(503, None) == answer_of(503, "http_503") == Answer.REFUSED
    for status, error in ((200, "stream_error"), (200, "stream_overloaded_error"),
                          (503, "refused_in_stream"), (0, "reset"), (500, None)):  # fmt: skip
        assert answer_of(status, error) == Answer.FAILED, (status, error)


def test_failures_are_sorted_by_kind() -> None:
    samples = build_samples(
        [10.0] * 6,
        status=[0, 200, 0, 500, 0, 429],
        error=["timeout", "timeout", "interrupted", "http_500", "reset", "http_429"],
    )
    outcomes, summary = judged(samples)
    assert list(outcomes.names()) == [
        "timed_out",
        "timed_out",
        "interrupted",
        "failed",
        "failed",
        "refused_fast",
    ]
    assert summary.outcomes is not None
    assert summary.outcomes.evidence == {
        "server_queue": 0,
        "ttft": 0,
        "time_to_reject": 1,
        "status": 5,
        "none": 0,
    }


def test_without_a_baseline_or_headers_an_admitted_request_is_undetermined() -> None:
    samples = timed([12.0, 400.0], [100.0, 100.0])
    outcomes, summary = judged(samples, NO_BASELINE)
    assert list(outcomes.names()) == ["undetermined", "undetermined"]
    assert list(outcomes.columns()["outcome_evidence"]) == ["none", "none"]
    assert summary.outcomes is not None and summary.outcomes.admitted_queued_share is None


def test_counts_by_stage_and_over_time_add_up() -> None:
    # Stage 0: 50 served; stage 1: 30 queued and 20 served, over 1 s of sends.
    ttft = [12.0] * 50 + [400.0] * 30 + [12.0] * 20
    samples = timed(ttft, [100.0] * 100, stage=[0] * 50 + [1] * 50)
    stages = [StageInfo("base", 0.0, 0.5, None, None), StageInfo("pulse", 0.5, 1.0, None, None)]
    _, summary = judged(samples, duration_s=1.0, stages=stages)
    out = summary.outcomes
    assert out is not None
    assert out.by_stage["0"].counts["served"] == 50 and out.by_stage["0"].counts["queued"] == 0
    assert out.by_stage["1"].counts["queued"] == 30
    assert out.by_stage["1"].admitted_queued_share == pytest.approx(0.6)
    assert list(out.counts) == list(OUTCOMES)
    assert not isinstance(out.over_time, Unavailable)
    for name in OUTCOMES:
        assert sum(out.over_time.counts[name]) == out.counts[name]


def test_outcome_rates_are_slo_keys_over_every_request() -> None:
    samples = timed([12.0] * 90 + [400.0] * 10, [100.0] * 100)
    info = run_info(outcome_basis=basis())
    summary = summarize(samples, run=info, slos=["queued:rate<0.5", "queued:rate<5%"])
    first, second = summary.slos
    assert first.verdict == "pass" and first.value == pytest.approx(0.10)
    assert second.verdict == "fail"
    assert "(10 of 100)" in second.message


def test_an_outcome_slo_on_a_run_that_judged_none_is_inconclusive_with_the_reason() -> None:
    summary = summarize(build_samples(n=100), run=run_info(), slos=["queued:rate<0.01"])
    assert summary.outcomes is None
    (slo,) = summary.slos
    assert slo.verdict == "inconclusive"
    assert "the run judged no outcomes" in slo.message


def test_a_saved_summary_judges_the_same_outcomes_again() -> None:
    samples = timed([12.0, 400.0] * 50, [100.0] * 100)
    _, summary = judged(samples)
    again = Summary.model_validate_json(summary.to_json())
    rebuilt = saved_run_info(again)
    assert rebuilt.outcome_basis == summary.outcomes.basis  # type: ignore[union-attr]
    assert summarize(samples, run=rebuilt, slos=[]).outcomes == summary.outcomes
    assert json.loads(again.to_json())["outcomes"]["counts"]["queued"] == 50


def test_at_rest_fit_reads_a_falling_line_as_flat_and_keeps_the_widest_spread() -> None:
    at_rest = fit(
        [AtRestProbe(size=32, prompt_tokens=32, ttft=t) for t in (0.020, 0.012, 0.010)]
        + [AtRestProbe(size=512, prompt_tokens=512, ttft=t) for t in (0.011, 0.011, 0.011)]
    )
    assert at_rest.slope == 0.0
    assert at_rest.base == pytest.approx(0.011)  # the lower median
    assert at_rest.spread == pytest.approx(0.010)


def _concat(*frames):
    out = pd.concat(frames, ignore_index=True)
    out["request_id"] = np.arange(len(out))
    return out
