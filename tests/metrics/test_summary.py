"""summarize(): the numbers of summary.json against known answers from the raw samples."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import RunInfo, ValidityThresholds, summarize
from zqbench.summary import SCHEMA, MetricStats, Stage

from .conftest import MS, build_samples

START_EPOCH_NS = 1_764_412_345_678_901_234


def run_info(**overrides) -> RunInfo:
    fields = {
        "scenario": "burst",
        "target": "http://127.0.0.1:8000",
        "api": "anthropic",
        "started_at": "2026-11-29T10:45:01Z",
        "start_monotonic_ns": 123_456,
        "start_epoch_ns": START_EPOCH_NS,
        "duration_s": 10.0,
    }
    fields.update(overrides)
    return RunInfo(**fields)


def shuffled_thousand() -> list[float]:
    """Latencies 1, 2, ..., 1000 ms in a fixed shuffled order."""
    return list(np.random.default_rng(7).permutation(np.arange(1.0, 1001.0)))


def test_percentiles_are_order_statistics_of_the_raw_latencies() -> None:
    """Latencies 1..1000 ms: p50 = 500, p90 = 900, p95 = 950, p99 = 990, p999 = 999 ms."""
    summary = summarize(build_samples(shuffled_thousand()), run=run_info(), slos=[])
    latency = summary.metrics["latency"]
    assert latency.n == 1000
    assert latency.p50 == pytest.approx(0.500)
    assert latency.p90 == pytest.approx(0.900)
    assert latency.p95 == pytest.approx(0.950)
    assert latency.p99 == pytest.approx(0.990)
    assert latency.p999 == pytest.approx(0.999)
    assert latency.max == pytest.approx(1.000)
    assert latency.min == pytest.approx(0.001)
    assert latency.mean == pytest.approx(0.5005)
    # CI ranks for n = 1000: p50 -> [x_(469), x_(532)] (F(468) = 2.31%, F(531) = 97.69%),
    # p99 -> [x_(983), x_(997)]
    assert latency.ci.p99 == (pytest.approx(0.983), pytest.approx(0.997))
    assert latency.ci.p50 == (pytest.approx(0.469), pytest.approx(0.532))


def test_schema_requests_and_json_safety() -> None:
    """The summary names its schema, counts requests and serialises without NaN or inf."""
    samples = build_samples(
        [10.0] * 1000,
        status=[200] * 970 + [503] * 20 + [0] * 10,
        error=[None] * 970 + ["http_503"] * 20 + ["timeout"] * 10,
    )
    summary = summarize(samples, run=run_info(), slos=["latency:p99<1s"])
    assert summary.schema_id == SCHEMA == "zqbench.summary/1"
    assert summary.requests.model_dump() == {"sent": 1000, "ok": 970, "failed": 30}
    assert summary.status_codes == {"200": 970, "503": 20, "transport:timeout": 10}
    assert summary.status_mix.share["503"] == pytest.approx(0.02)
    json.loads(summary.to_json())


def test_derived_metrics_known_answers() -> None:
    """10 ms requests, headers at 2.5 ms, first token at 5 ms, 11 output tokens:
    ttfb 2.5 ms, ttft 5 ms, tpot (10 - 5) / 10 = 0.5 ms."""
    summary = summarize(build_samples([10.0] * 200), run=run_info(), slos=[])
    metrics = summary.metrics
    assert metrics["ttfb"].p50 == pytest.approx(0.0025)
    assert metrics["ttft"].p99 == pytest.approx(0.005)
    assert metrics["tpot"].p50 == pytest.approx(0.0005)
    assert metrics["schedule_lag"].max == 0.0


def test_tpot_runs_from_the_first_to_the_last_token_over_usage_tokens() -> None:
    """First token at 5 ms, last at 8 ms, the body ends at 10 ms, usage says 11 tokens in
    6 events (a server that packs tokens): tpot = (8 - 5) / (11 - 1) = 0.3 ms."""
    samples = build_samples([10.0] * 200)
    samples["t_last_token"] = samples["t_send"] + 8 * MS
    samples["n_chunks"] = 6
    assert summarize(samples, run=run_info(), slos=[]).metrics["tpot"].p50 == pytest.approx(3e-4)


def test_tpot_needs_two_token_events() -> None:
    """One event (a non-streamed body, a whole answer in one chunk) times no decoding."""
    samples = build_samples([10.0] * 200, n_chunks=1)
    assert summarize(samples, run=run_info(), slos=[]).metrics["tpot"] == MetricStats(
        n=0,
        unavailable="no successful request had more than one output token in two or more "
        "token events",
    )


def test_tpot_of_samples_saved_before_t_last_token_runs_to_t_end() -> None:
    samples = build_samples([10.0] * 200).drop(columns=["t_last_token"])
    samples["t_first_token"] = samples["t_send"] + 4 * MS
    assert summarize(samples, run=run_info(), slos=[]).metrics["tpot"].p50 == pytest.approx(6e-4)


def test_unavailable_metrics_have_reasons_not_zeros() -> None:
    """Closed loop, no timing headers, no refusals, no ITL: each such metric says why."""
    samples = build_samples([10.0] * 200, t_intended=None)
    summary = summarize(samples, run=run_info(loop="closed"), slos=[])
    metrics = summary.metrics
    assert metrics["latency_corrected"] == MetricStats(
        n=0, unavailable="closed loop: requests have no intended send time"
    )
    assert metrics["schedule_lag"].n == 0
    assert "X-Request-Dispatch-Time" in metrics["server_queue"].unavailable
    assert "X-Request-Start-Time" in metrics["dispatch_delay"].unavailable
    assert "X-Request-Start-Time" in metrics["dispatch_jitter"].unavailable
    assert metrics["time_to_reject"].unavailable == "no request was refused (429/503/529)"
    assert "inter-token" in metrics["itl"].unavailable
    for entry in metrics.values():
        if entry.unavailable is not None:
            assert set(entry.model_dump()) == {"n", "unavailable"}
    assert summary.validity.ok is True  # closed loop: no lag check


def test_error_adjusted_percentiles_count_failures_as_infinite() -> None:
    """2% timeouts: the accepted-only p99 is 10 ms, the error-adjusted p99 is "inf"."""
    samples = build_samples(
        [10.0] * 1000, status=[0] * 20 + [200] * 980, error=["timeout"] * 20 + [None] * 980
    )
    metrics = summarize(samples, run=run_info(), slos=[]).metrics
    assert metrics["latency"].p99 == pytest.approx(0.010)
    adjusted = metrics["latency_error_adjusted"]
    assert adjusted.n == 1000
    assert adjusted.p50 == pytest.approx(0.010)
    assert adjusted.p95 == pytest.approx(0.010)
    assert adjusted.p99 == "inf"
    assert adjusted.max == "inf"
    assert adjusted.mean == "inf"
    assert adjusted.ci.p99 == ("inf", "inf")  # ranks 983..997 of 1000, 20 are inf


def test_time_to_reject() -> None:
    """Refusals (429 / 503 / 529) in 1 ms; a transport timeout is not a refusal."""
    samples = build_samples(
        [1.0] * 100 + [10.0] * 100 + [5000.0] * 10,
        status=[429] * 50 + [529] * 50 + [200] * 100 + [0] * 10,
        error=["http_429"] * 50 + ["http_529"] * 50 + [None] * 100 + ["timeout"] * 10,
    )
    ttr = summarize(samples, run=run_info(), slos=[]).metrics["time_to_reject"]
    assert ttr.n == 100
    assert ttr.max == pytest.approx(0.001)


def test_by_stage_and_by_class_breakdowns() -> None:
    """Stage 0 holds 1..100 ms, stage 1 holds 101..200 ms; classes split odd and even."""
    latencies = list(range(1, 201))
    samples = build_samples(
        latencies,
        stage=[0] * 100 + [1] * 100,
        request_class=["odd" if v % 2 else "even" for v in latencies],
    )
    latency = summarize(samples, run=run_info(), slos=[]).metrics["latency"]
    assert latency.by_stage["0"].p50 == pytest.approx(0.050)
    assert latency.by_stage["0"].max == pytest.approx(0.100)
    assert latency.by_stage["1"].min == pytest.approx(0.101)
    assert latency.by_stage["1"].p90 == pytest.approx(0.190)
    assert latency.by_class["odd"].max == pytest.approx(0.199)
    assert latency.by_class["even"].min == pytest.approx(0.002)
    assert latency.by_class["even"].n == 100


def test_ratios_per_class() -> None:
    """p99/p50 per class; the run's value is the worst class with >= 100 samples."""
    samples = build_samples(
        list(range(1, 201)) + [10.0] * 100,
        request_class=["long"] * 200 + ["short"] * 100,
    )
    ratios = summarize(samples, run=run_info(), slos=[]).ratios["latency"]
    assert ratios.by_class["long"].model_dump() == {"p99_p50": pytest.approx(1.98), "n": 200}
    assert ratios.by_class["short"].p99_p50 == pytest.approx(1.0)
    assert ratios.p99_p50 == pytest.approx(1.98)
    assert ratios.worst_class == "long"


def test_dispatch_delay_maps_send_time_to_the_server_clock() -> None:
    """srv_start 250 us after the send on the epoch clock, with a +3 ms server offset."""
    samples = build_samples([10.0] * 300)
    offset_ns = 3 * MS
    send = samples["t_send"].to_numpy()
    samples["srv_start"] = (START_EPOCH_NS + send + offset_ns + 250_000) / 1e9
    samples["srv_received"] = (START_EPOCH_NS + send + offset_ns + 100_000) / 1e9
    samples["srv_dispatch"] = (START_EPOCH_NS + send + offset_ns + 150_000) / 1e9
    summary = summarize(samples, run=run_info(clock_offset_ns=offset_ns), slos=[])
    metrics = summary.metrics
    assert metrics["dispatch_delay"].p50 == pytest.approx(250e-6, abs=1e-6)
    assert metrics["server_queue"].p99 == pytest.approx(50e-6, abs=1e-6)
    assert metrics["dispatch_jitter"].n == 3  # three windows of 100
    assert metrics["dispatch_jitter"].max == pytest.approx(0.0, abs=1e-6)
    assert summary.clock.server_offset_ns == offset_ns


def test_lagging_generator_makes_the_run_invalid() -> None:
    """Every request sent 20 ms late: invalid with the reason, even though the SLO passes."""
    samples = build_samples([10.0] * 1000)
    samples["t_intended"] = samples["t_send"] - 20 * MS
    summary = summarize(samples, run=run_info(), slos=["latency:p99<1s"])
    assert summary.slos[0].verdict == "pass"
    assert summary.verdict == "invalid"
    assert summary.validity.ok is False
    assert summary.validity.reasons == [
        "the generator fell behind its schedule: schedule_lag p99 = 20 ms > 10 ms"
    ]


def test_validity_thresholds_are_configurable() -> None:
    """A 20 ms lag passes a 50 ms limit."""
    samples = build_samples([10.0] * 1000)
    samples["t_intended"] = samples["t_send"] - 20 * MS
    limits = ValidityThresholds(max_schedule_lag_p99_s=0.050)
    summary = summarize(samples, run=run_info(validity=limits), slos=[])
    assert summary.validity.ok is True
    assert summary.verdict == "pass"


def test_under_delivered_load_and_too_few_samples_are_invalid() -> None:
    """50 of 100 scheduled requests sent: too few samples and 50% of the offered load."""
    summary = summarize(build_samples([10.0] * 50), run=run_info(offered_requests=100), slos=[])
    assert summary.verdict == "invalid"
    assert summary.validity.reasons == [
        "only 50 requests were sent; a valid run needs at least 100",
        "the generator achieved 50.0% of the offered load (< 97%)",
    ]
    assert summary.load.achieved_ratio == pytest.approx(0.5)


def test_goodput_counts_requests_meeting_every_per_request_bound() -> None:
    """latency < 500 ms over 1..1000 ms: 499 good requests in 10 s = 49.9 req/s."""
    summary = summarize(
        build_samples(shuffled_thousand()), run=run_info(), slos=["latency:p99<500ms"]
    )
    assert summary.throughput.goodput_requests == 499
    assert summary.throughput.goodput_per_s == pytest.approx(49.9)
    assert summary.throughput.requests_per_s == pytest.approx(100.0)
    assert summary.throughput.output_tokens_per_s == pytest.approx(1100.0)
    assert summary.verdict == "fail"


def test_slo_records_in_summary() -> None:
    """Each SLO becomes a record with expr, metric, value, threshold, verdict and CI."""
    summary = summarize(build_samples(shuffled_thousand()), run=run_info(), slos=["latency:p99<1s"])
    (record,) = summary.slos
    assert record.expr == "latency:p99<1s"
    assert record.metric == "latency"
    assert record.value == pytest.approx(0.99)
    assert record.threshold == 1.0
    assert record.verdict == "pass"
    assert record.ci_low == pytest.approx(0.983)
    assert record.ci_high == pytest.approx(0.997)
    assert summary.verdict == "pass"


def test_stages_and_run_facts_are_reported() -> None:
    """Stages, clock, scenario and target pass through."""
    run = run_info(stages=(StageInfo("warm", 0.0, 5.0, 100.0), StageInfo("burst", 5.0, 10.0)))
    summary = summarize(build_samples([10.0] * 100), run=run, slos=[])
    assert summary.stages == [
        Stage(index=0, name="warm", start=0.0, end=5.0, target_rate=100.0),
        Stage(index=1, name="burst", start=5.0, end=10.0),
    ]
    assert json.loads(summary.to_json())["stages"] == [
        {"index": 0, "name": "warm", "start": 0.0, "end": 5.0, "target_rate": 100.0},
        {"index": 1, "name": "burst", "start": 5.0, "end": 10.0},
    ]
    assert summary.clock.start_epoch_ns == START_EPOCH_NS
    assert summary.scenario.name == "burst"
    assert summary.target == "http://127.0.0.1:8000"
    assert summary.duration == 10.0


def test_empty_run() -> None:
    """No samples at all: every metric unavailable, the run invalid, nothing is zero."""
    summary = summarize(build_samples([]), run=run_info(), slos=["latency:p99<1s"])
    assert summary.requests.model_dump() == {"sent": 0, "ok": 0, "failed": 0}
    assert summary.metrics["latency"].model_dump() == {"n": 0, "unavailable": "no request sent"}
    assert summary.slos[0].verdict == "inconclusive"
    assert summary.verdict == "invalid"
    json.loads(summary.to_json())


@pytest.mark.slow
def test_a_million_rows_in_a_few_seconds() -> None:
    """1,000,000 samples, 3 stages, 2 classes, timing headers: summarised in seconds."""
    n = 1_000_000
    rng = np.random.default_rng(0)
    samples = build_samples(
        rng.lognormal(3, 0.5, n),
        interval_ms=0.01,
        stage=rng.integers(0, 3, n).astype(np.int32),
        request_class=rng.choice(["short", "long"], n).astype(object),
        itl_mean_ns=rng.integers(0, 10**6, n),
    )
    send = samples["t_send"].to_numpy()
    samples["srv_start"] = (START_EPOCH_NS + send + rng.integers(0, 50_000, n)) / 1e9
    started = time.process_time()  # CPU time: the cost, not what else shares the machine
    summary = summarize(samples, run=run_info(), slos=["latency:p99<100ms", "errors:rate<0.01"])
    spent = time.process_time() - started
    assert spent < 15.0, f"{spent:.1f} s of CPU (~2-3 s on an idle core)"
    assert summary.requests.sent == n


def test_achieved_rate_is_over_the_schedules_span_in_open_loop() -> None:
    """A ramp from 0: 100 requests over 10 s (10 req/s mean), sent in its last 2 s. Over the
    span between the first and the last send that read 50 req/s, five times the 10 offered;
    over the schedule's own span it is what was offered times the share that was sent."""
    samples = build_samples([10.0] * 100, interval_ms=20.0)  # 100 sends within 1.98 s
    full = summarize(samples, run=run_info(offered_requests=100, offered_rate=10.0), slos=[])
    assert full.load.achieved_rate == pytest.approx(10.0)
    assert full.load.achieved_ratio == pytest.approx(1.0)
    half = summarize(
        build_samples([10.0] * 50, interval_ms=20.0),
        run=run_info(offered_requests=100, offered_rate=10.0),
        slos=[],
    )
    assert half.load.achieved_rate == pytest.approx(5.0)


def test_closed_loop_achieved_rate_is_over_the_sends_span() -> None:
    """No schedule: (sent - 1) / (last send - first send) = 99 / 1.98 s = 50 req/s."""
    samples = build_samples([10.0] * 100, interval_ms=20.0)
    summary = summarize(samples, run=run_info(loop="closed"), slos=[])
    assert summary.load.achieved_rate == pytest.approx(50.0)
    assert summary.load.achieved_ratio is None
