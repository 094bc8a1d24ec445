"""StopWatch (zqbench.pipeline.stopping) fed progress by hand: no server, no sleeping.

"Now" is placed inside a chosen stage by setting `start_ns` back from the real clock; where
a test needs several moments it replaces the module's clock with a fixed one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pytest

from zqbench.engines.live import Progress
from zqbench.load.arrival_rate import ArrivalWork, constant
from zqbench.load.spans import StageInfo
from zqbench.metrics.classify import ANSWERS, LIVE_ANSWER
from zqbench.pipeline import stopping
from zqbench.pipeline.stopping import StopWatch
from zqbench.stop.config import ErrorRateRule, QueuedShareRule, QueueGrowthRule, StopConfig
from zqbench.stop.ended import EndedAt
from zqbench.summary import AtRest, AtRestProbe, OutcomeBasis, OutcomeRules, Unavailable

NS = 1_000_000_000
Row = tuple[int, ...]  # a LIVE_ANSWER row, in its field order
OK, REFUSED, TIMED_OUT, INTERRUPTED, FAILED = (
    ANSWERS.index(k) for k in ("ok", "refused", "timed_out", "interrupted", "failed")
)
STAGES = [
    StageInfo("warm", 0.0, 10.0),
    StageInfo("push", 10.0, 20.0),
    StageInfo("peak", 20.0, 30.0),
]
RULES = OutcomeRules(server_queue=0.005, margin=0.02, at_rest_probes=0)
AT_REST = AtRest(
    probes=[AtRestProbe(size=100, prompt_tokens=100, ttft=0.05)],
    base=0.04,
    slope=0.0001,  # 100 tokens: 0.05 s at rest; 1000 tokens: 0.14 s
    spread=0.0,
)
BASIS = OutcomeBasis(rules=RULES, at_rest=AT_REST)
ERRORS = StopConfig(error_rate=ErrorRateRule(above=0.5, window_s=5.0, min_requests=20))
QUEUED = StopConfig(queued_share=QueuedShareRule(above=0.5, window_s=5.0, min_requests=20))


def done(
    stage: int = 1,
    t_send: float = 13.5,
    t_end: float = 14.0,
    *,
    ttft: float = -1.0,
    queue: float = -1.0,
    hold: float = -1.0,
    tokens: int = -1,
    outcome: int = OK,
) -> Row:
    """One answered request; times in seconds (-1: none), as a LIVE_ANSWER row's ns."""

    def ns(s: float) -> int:
        return -1 if s < 0 else round(s * NS)

    return (stage, ns(t_send), ns(t_end), ns(ttft), ns(queue), ns(hold), tokens, outcome)


def progress(*batches: tuple[int, int, Sequence[Row]], inflight: int = 0) -> Progress:
    rows = tuple((w, s, np.array(list(b), dtype=LIVE_ANSWER)) for w, s, b in batches)
    return Progress(inflight=inflight, completions=rows)


def watcher(
    config: StopConfig,
    at_s: float,
    basis: OutcomeBasis | None = BASIS,
    stages: Sequence[StageInfo] = STAGES,
    notes: list[str] | None = None,
) -> tuple[StopWatch, EndedAt]:
    """A watcher whose "now" is `at_s` seconds into the run (give or take the test's own
    microseconds)."""
    ended = EndedAt(len(stages), shared=False)
    watch = StopWatch(config, stages, basis, ended, notes.append if notes is not None else None)
    watch.start(time.perf_counter_ns() - round(at_s * NS))
    return watch, ended


class Clock:
    """A stand-in for the `time` module in zqbench.pipeline.stopping."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def perf_counter_ns(self) -> int:
        return self.ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock(1_000 * NS)
    monkeypatch.setattr(stopping, "time", c)
    return c


# --------------------------------------------------------------------------- taking batches


def test_nothing_before_start() -> None:
    ended = EndedAt(3, shared=False)
    watch = StopWatch(ERRORS, STAGES, BASIS, ended)
    watch.observe(progress((0, 1, [done(outcome=FAILED)] * 30)))
    assert ended.run() == 0 and watch.events == []


def test_a_batch_repeated_is_counted_once() -> None:
    watch, ended = watcher(ERRORS, 15.0)
    failed = [done(outcome=FAILED)] * 10
    watch.observe(progress((0, 1, failed)))
    # The same batch again, with another worker's: counted twice it would be 20 of 20 failed.
    watch.observe(progress((0, 1, failed)))
    watch.observe(progress((0, 1, failed), (1, 1, [done()] * 10)))
    assert watch.events == [] and ended.run() == 0  # 10 of 20 failed: not past 0.5
    # Worker 0's next batch is new; worker 1's seq 1 again is not.
    watch.observe(progress((0, 2, [done(outcome=FAILED)]), (1, 1, [done()] * 10)))
    assert len(watch.events) == 1
    assert watch.events[0].requests == 21
    assert watch.events[0].measured == pytest.approx(11 / 21)


def test_an_older_batch_number_is_not_taken() -> None:
    watch, ended = watcher(ERRORS, 15.0)
    watch.observe(progress((0, 5, [done()] * 10)))
    watch.observe(progress((0, 4, [done(outcome=FAILED)] * 20)))  # late and stale
    assert watch.events == [] and ended.run() == 0


def test_completions_of_another_stage_are_ignored() -> None:
    watch, ended = watcher(ERRORS, 15.0)
    # stage 0's requests still draining into stage 1's window
    drained = [done(stage=0, t_send=9.9, t_end=14.0, outcome=FAILED)] * 30
    watch.observe(progress((0, 1, drained)))
    assert watch.events == [] and ended.run() == 0
    watch.observe(progress((0, 2, [done(outcome=FAILED)] * 19)))
    assert watch.events == []  # 19 of stage 1: too few for a verdict
    watch.observe(progress((0, 3, [done(outcome=FAILED)])))
    assert len(watch.events) == 1
    assert watch.events[0].requests == 20  # stage 1's only


def test_answers_older_than_the_window_are_left_out() -> None:
    watch, ended = watcher(ERRORS, 17.0)
    old = [done(t_send=10.1, t_end=11.5, outcome=FAILED)] * 30  # before 17 - 5 s
    watch.observe(progress((0, 1, old)))
    assert watch.events == [] and ended.run() == 0
    watch.observe(progress((0, 2, [done(t_send=10.1, t_end=12.5, outcome=FAILED)] * 20)))
    assert watch.events[0].requests == 20  # inside the window: judged


def test_past_the_plan_nothing_is_judged() -> None:
    watch, ended = watcher(ERRORS, 31.0)
    watch.observe(progress((0, 1, [done(stage=2, t_send=29, t_end=30.5, outcome=FAILED)] * 30)))
    assert watch.events == [] and ended.run() == 0


# --------------------------------------------------------------------------- error_rate


def test_error_rate_ends_the_run() -> None:
    notes: list[str] = []
    watch, ended = watcher(ERRORS, 15.0, notes=notes)
    batch = [done(outcome=FAILED)] * 8 + [done(outcome=TIMED_OUT)] * 4 + [done()] * 8
    batch += [done(outcome=INTERRUPTED)] * 5  # not answered: left out of the share
    batch += [done(outcome=REFUSED)] * 2  # answered, not counted as bad by default
    watch.observe(progress((0, 1, batch), inflight=7))
    assert ended.run() != 0
    assert ended.stage(1) == ended.run()
    assert ended.stage(0) == 0 and ended.stage(2) == 0
    (event,) = watch.events
    assert event.rule == "error_rate"
    assert event.ends == "run"
    assert (event.stage, event.stage_name) == (1, "push")
    assert event.requests == 22
    assert event.measured == pytest.approx(12 / 22)
    assert event.bound == 0.5
    assert event.growth is None
    assert 15.0 <= event.at < 16.0
    assert ended.run() == watch.start_ns + int(event.at * NS)
    assert event.reason == (
        "12 of 22 requests answered in the last 5 s failed or timed out (55% > 50%)"
    )
    assert notes == [f"stop: error_rate ended the run at {event.at:.1f} s: {event.reason}"]

    # Ended: nothing more is judged or recorded.
    at = ended.run()
    watch.observe(progress((0, 2, [done(outcome=FAILED)] * 100)))
    watch.observe(progress((1, 1, [done(outcome=FAILED)] * 100)))
    assert len(watch.events) == 1 and len(notes) == 1
    assert ended.run() == at
    stop = watch.record([])
    assert stop.ended_run is True
    assert stop.rules == ["error_rate"]
    assert stop.events == watch.events
    assert stop.not_sent == 0


def test_error_rate_counts_refusals_when_asked() -> None:
    rule = ErrorRateRule(above=0.5, window_s=5.0, min_requests=20, count_refusals=True)
    watch, ended = watcher(StopConfig(error_rate=rule), 15.0)
    watch.observe(progress((0, 1, [done(outcome=REFUSED)] * 11 + [done()] * 9)))
    assert ended.run() != 0
    assert watch.events[0].measured == pytest.approx(0.55)
    assert "failed, timed out or were refused" in watch.events[0].reason


def test_a_stage_rule_ends_only_its_stage() -> None:
    rule = ErrorRateRule(above=0.5, window_s=5.0, min_requests=20, ends="stage")
    notes: list[str] = []
    watch, ended = watcher(StopConfig(error_rate=rule), 15.0, notes=notes)
    watch.observe(progress((0, 1, [done(outcome=FAILED)] * 20)))
    assert ended.stage(1) != 0
    assert ended.run() == 0 and not ended.run_ended()
    assert watch.events[0].ends == "stage"
    assert notes[0].startswith("stop: error_rate ended stage push at ")
    # The stage stays ended: later answers of it trip nothing more.
    watch.observe(progress((0, 2, [done(outcome=FAILED)] * 20)))
    assert len(watch.events) == 1
    assert watch.record([]).ended_run is False


# --------------------------------------------------------------------------- queued_share


def test_queued_share_by_server_queue() -> None:
    watch, ended = watcher(QUEUED, 15.0)
    queued = [done(queue=0.006)] * 10
    served = [done(queue=0.005)] * 10  # at the bound: served (queued is past it)
    watch.observe(progress((0, 1, queued + served)))
    assert watch.events == [] and ended.stage(1) == 0  # 10 of 20: not past 0.5
    # failures are not admitted requests: not judged
    watch.observe(progress((0, 2, [done(outcome=FAILED, queue=0.5)] * 10)))
    assert watch.events == []
    watch.observe(progress((0, 3, [done(queue=0.2, ttft=0.001)])))  # the header decides
    (event,) = watch.events
    assert event.rule == "queued_share"
    assert event.ends == "stage"
    assert (event.stage, event.stage_name, event.requests) == (1, "push", 21)
    assert event.measured == pytest.approx(11 / 21)
    assert ended.stage(1) != 0 and ended.run() == 0


def test_queued_share_by_ttft_against_at_rest() -> None:
    """No header: T(p) = 2 (base + slope p) + max(margin, hold / 2)."""
    watch, ended = watcher(QUEUED, 15.0)
    # 100 tokens: T = 2 * 0.05 + 0.02 = 0.12 s; 1000 tokens: T = 2 * 0.14 + 0.02 = 0.30 s
    queued = [done(ttft=0.13, tokens=100)] * 11
    served = [done(ttft=0.13, tokens=1000)] * 8
    served += [done(ttft=0.11)]  # tokens unknown: the largest probe's, 100: 0.12 s
    watch.observe(progress((0, 1, queued + served)))
    (event,) = watch.events
    assert event.requests == 20
    assert event.measured == pytest.approx(11 / 20)
    assert ended.stage(1) != 0


def test_queued_share_by_ttft_allows_half_the_hold() -> None:
    watch, ended = watcher(QUEUED, 15.0)
    # holds of 0.1 s (of any stage's answers): the allowance is 0.05 s, T(100) = 0.15 s
    holds = [done(stage=0, t_send=9.0, t_end=9.5, hold=0.1)] * 5
    watch.observe(progress((0, 1, holds + [done(ttft=0.13, tokens=100)] * 20)))
    assert watch.events == [] and ended.stage(1) == 0
    watch.observe(progress((0, 2, [done(ttft=0.16, tokens=100)] * 21)))
    assert watch.events[0].measured == pytest.approx(21 / 41)


def test_queued_share_by_ttft_needs_the_at_rest_fit() -> None:
    unfit = OutcomeBasis(rules=RULES, at_rest=Unavailable(unavailable="no probes"))
    watch, ended = watcher(QUEUED, 15.0, basis=unfit)
    watch.observe(progress((0, 1, [done(ttft=5.0)] * 30)))
    assert watch.events == [] and ended.stage(1) == 0
    # the header still judges where it is given
    watch.observe(progress((0, 2, [done(queue=1.0)] * 20)))
    assert watch.events[0].requests == 20


def test_queued_share_without_a_basis_judges_nothing() -> None:
    watch, ended = watcher(QUEUED, 15.0, basis=None)
    watch.observe(progress((0, 1, [done(queue=1.0, ttft=5.0)] * 30)))
    assert watch.events == [] and ended.stage(1) == 0


def test_ending_the_last_stage_ends_the_run() -> None:
    notes: list[str] = []
    watch, ended = watcher(QUEUED, 25.0, notes=notes)
    watch.observe(progress((0, 1, [done(stage=2, t_send=24.0, t_end=24.5, queue=1.0)] * 20)))
    (event,) = watch.events
    assert event.ends == "stage" and event.stage == 2 and event.stage_name == "peak"
    assert ended.stage(2) != 0
    assert ended.run() == ended.stage(2)
    assert watch.record([]).ended_run is True
    assert notes[0].startswith("stop: queued_share ended the run at ")


# --------------------------------------------------------------------------- queue_growth


def growing(n: int = 20, *, header: bool = True, hold: float = -1.0) -> list[Row]:
    """Stage 1's admitted requests sent 11.6 s to 12.55 s, each waiting 0.2 s longer per
    second of send time (no noise); `header`: with its server_queue."""
    out = []
    for i in range(n):
        send = 11.6 + 0.05 * i
        wait = 0.2 * (send - 11.6)
        out.append(
            done(
                t_send=send,
                t_end=send + wait + 0.05,
                queue=wait if header else -1.0,
                ttft=wait + 0.01,
                hold=hold,
            )
        )
    return out


def test_queue_growth_through_the_watcher(clock: Clock) -> None:
    rule = QueueGrowthRule(window_s=3.0, confidence=0.95, min_requests=10)
    ended = EndedAt(3, shared=False)
    watch = StopWatch(StopConfig(queue_growth=rule), STAGES, BASIS, ended)
    start = clock.ns
    watch.start(start)
    for i, inflight in enumerate((20, 21, 22)):
        clock.ns = start + round((13.0 + 0.5 * i) * NS)
        watch.observe(progress((0, 1, growing()), inflight=inflight))
        assert watch.events == []  # fewer than 4 in-flight readings
    clock.ns = start + round(14.5 * NS)
    watch.observe(progress((0, 1, growing()), inflight=23))
    (event,) = watch.events
    g = event.growth
    assert g is not None
    assert event.rule == "queue_growth" and event.ends == "stage" and event.stage == 1
    assert event.at == 14.5
    assert ended.stage(1) == start + round(14.5 * NS) and ended.run() == 0
    assert g.wait_by == "server_queue"  # most answers carry it
    assert g.wait_slope == pytest.approx(0.2)
    assert g.wait_slope_low == pytest.approx(0.2)
    assert g.wait_rise_low == pytest.approx(0.2 * 0.95)
    assert g.inflight_slope == pytest.approx(2.0)
    assert g.inflight_now == 23
    assert g.min_rise == pytest.approx(0.02)  # no hold yet: the [outcomes] margin
    assert event.requests == 20
    assert event.measured == pytest.approx(g.wait_rise_low)


def test_queue_growth_by_ttft_with_the_hold_allowance(clock: Clock) -> None:
    rule = QueueGrowthRule(window_s=3.0, confidence=0.95, min_requests=10)
    ended = EndedAt(3, shared=False)
    watch = StopWatch(StopConfig(queue_growth=rule), STAGES, BASIS, ended)
    start = clock.ns
    watch.start(start)
    no_header = growing(header=False, hold=0.2)
    for i, inflight in enumerate((20, 22, 24, 26)):
        clock.ns = start + round((13.0 + 0.5 * i) * NS)
        watch.observe(progress((0, 1, no_header), inflight=inflight))
    (event,) = watch.events
    assert event.growth is not None
    assert event.growth.wait_by == "ttft"
    assert event.growth.min_rise == pytest.approx(0.1)  # half the 0.2 s hold
    assert event.growth.inflight_slope == pytest.approx(4.0)


# --------------------------------------------------------------------------- not_sent


def uniform_works(n_workers: int = 2) -> list[ArrivalWork]:
    """10 req/s over the 3 stages: t = 0.1 s ... 30.0 s, stage k holding (10k, 10k + 10]."""
    k = np.arange(1, 301)
    times = k * 100_000_000
    stages = ((k - 1) // 100).astype(np.int32)
    return [
        ArrivalWork(
            request_ids=k[w::n_workers].astype(np.int64),
            times_ns=times[w::n_workers].astype(np.int64),
            stages=stages[w::n_workers],
        )
        for w in range(n_workers)
    ]


def test_not_sent_after_a_stage_ended() -> None:
    watch, ended = watcher(QUEUED, 15.0)
    watch.observe(progress((0, 1, [done(queue=1.0)] * 20)))
    assert ended.stage(1) != 0 and ended.run() == 0
    cut = ended.stage(1) - watch.start_ns
    works = uniform_works()
    # What a worker skips: its stage ended at or before the request was due.
    expected = sum(int(np.count_nonzero((w.stages == 1) & (w.times_ns >= cut))) for w in works)
    assert 40 <= expected <= 50
    assert watch.record(works).not_sent == expected


def test_not_sent_after_the_run_ended() -> None:
    watch, ended = watcher(ERRORS, 15.0)
    watch.observe(progress((0, 1, [done(outcome=FAILED)] * 20)))
    cut = ended.run() - watch.start_ns
    works = uniform_works(3)
    expected = sum(int(np.count_nonzero(w.times_ns >= cut)) for w in works)
    assert 140 <= expected <= 150
    assert watch.record(works).not_sent == expected


def test_not_sent_of_a_stage_then_the_run(clock: Clock) -> None:
    """Stage 1 ended at 15 s, the run at 25 s (stage 2 sent until then)."""
    config = StopConfig(
        error_rate=ErrorRateRule(above=0.5, window_s=5.0, min_requests=20),
        queued_share=QueuedShareRule(above=0.5, window_s=5.0, min_requests=20),
    )
    ended = EndedAt(3, shared=False)
    watch = StopWatch(config, STAGES, BASIS, ended)
    start = clock.ns
    watch.start(start)
    clock.ns = start + 15 * NS + 50_000_000  # 15.05 s
    watch.observe(progress((0, 1, [done(queue=1.0)] * 20)))
    clock.ns = start + 25 * NS + 50_000_000  # 25.05 s
    watch.observe(progress((0, 2, [done(stage=2, t_send=24, t_end=24.5, outcome=FAILED)] * 20)))
    assert [e.rule for e in watch.events] == ["queued_share", "error_rate"]
    assert ended.stage(1) == start + 15_050_000_000
    assert ended.run() == ended.stage(2) == start + 25_050_000_000
    works = uniform_works()
    # stage 1 from 15.1 s to 20.0 s (50), everything from 25.1 s to 30.0 s (50)
    expected = sum(
        int(np.count_nonzero((w.stages == 1) & (w.times_ns >= 15_050_000_000)))
        + int(np.count_nonzero(w.times_ns >= 25_050_000_000))
        for w in works
    )
    assert expected == 100
    assert watch.record(works).not_sent == expected


def test_not_sent_for_a_planned_schedule_ending_off_the_float_grid() -> None:
    """A real plan: 10 req/s for 8.2 s, its last arrival due at exactly 8.2 s (the plan's
    end, inside it). A rule ends the run 5 s in: every arrival due from then is unsent."""
    plan = constant(10, 8.2, "only").plan(2, seed=1)
    works = [w for w in plan.works if isinstance(w, ArrivalWork)]
    assert len(works) == 2
    assert max(int(w.times_ns[-1]) for w in works) == 8_200_000_000
    watch, ended = watcher(ERRORS, 5.0, stages=plan.stages)
    watch.observe(progress((0, 1, [done(stage=0, t_send=4.0, t_end=4.5, outcome=FAILED)] * 20)))
    assert ended.run() != 0
    cut = ended.run() - watch.start_ns
    expected = sum(int(np.count_nonzero(w.times_ns >= cut)) for w in works)
    assert watch.record(works).not_sent == expected


def test_not_sent_is_none_for_a_closed_loop() -> None:
    class Closed:
        def due(self, elapsed_ns: int) -> int | None:
            return None

    watch, ended = watcher(ERRORS, 15.0)
    watch.observe(progress((0, 1, [done(outcome=FAILED)] * 20)))
    assert ended.run() != 0
    assert watch.record([Closed()]).not_sent is None  # type: ignore[list-item]


def test_not_sent_nothing_ended() -> None:
    watch, ended = watcher(ERRORS, 15.0)
    watch.observe(progress((0, 1, [done()] * 20)))
    assert ended.run() == 0 and ended.stage(1) == 0
    stop = watch.record(uniform_works())
    assert (stop.events, stop.ended_run, stop.not_sent) == ([], False, 0)


def test_a_future_timing_stamp_is_an_unknown_wait_not_a_lost_run() -> None:
    # X-Request-Dispatch-Time 99999999999.5 (under the parsers' 1e11 bound) gave a wait no
    # int64 of ns holds: the watcher raised OverflowError and every sample was lost (#44).
    from zqbench.engines.live import live_answer
    from zqbench.samples.sample import Sample

    def sample(dispatch: float) -> Sample:
        return Sample(
            1, 0, 0, "default", None, 0, 10, 20, 30, 40, 200, None, 5, 3, True,
            None, None, None, 3, 1764400009.5, dispatch, None, None, "1.1", 100, None,
        )  # fmt: skip

    far, near = live_answer(sample(99999999999.5)), live_answer(sample(1764400009.75))
    rows = np.array([far, near], dtype=LIVE_ANSWER)
    assert rows["server_queue"].tolist() == [-1, 250_000_000]
