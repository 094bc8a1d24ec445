"""The SLO language: parsing, one-line errors, and pass / fail / inconclusive decisions."""

from __future__ import annotations

import numpy as np
import pytest

from zqbench.errors import UsageError
from zqbench.metrics.frame import build_frame
from zqbench.metrics.slo import (
    Evidence,
    evaluate_slo,
    goodput_bounds,
    parse_slo,
    parse_slos,
    ratio_interval,
    run_verdict,
)
from zqbench.summary import SloRecord, SloVerdict

from .conftest import MS, build_samples


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("latency:p99<150ms", ("latency", "p99", "<", 0.15, 0.99, None)),
        ("latency:p99/p50<=1.15", ("latency", "p99/p50", "<=", 1.15, None, (0.99, 0.5))),
        ("ttft:p99<100ms", ("ttft", "p99", "<", 0.1, 0.99, None)),
        ("dispatch_jitter:max<200us", ("dispatch_jitter", "max", "<", 0.0002, None, None)),
        ("status_429:rate<0.001", ("status_429", "rate", "<", 0.001, None, None)),
        ("errors:rate<0.01", ("errors", "rate", "<", 0.01, None, None)),
        ("errors<1%", ("errors", "rate", "<", 0.01, None, None)),
        ("gpu_density>=0.85", ("gpu_density", "value", ">=", 0.85, None, None)),
        ("gpu_density>=85%", ("gpu_density", "value", ">=", 0.85, None, None)),
        ("latency_corrected:p99.9<1s", ("latency_corrected", "p99.9", "<", 1.0, 0.999, None)),
        ("latency:p999 <= 1.5e2 ms", ("latency", "p999", "<=", 0.15, 0.999, None)),
        ("ttft:p50 > 2us", ("ttft", "p50", ">", 2e-6, 0.5, None)),
        ("latency:mean<0.5s", ("latency", "mean", "<", 0.5, None, None)),
        ("goodput>=100", ("goodput", "value", ">=", 100.0, None, None)),
    ],
)
def test_parse_valid(text: str, fields: tuple) -> None:
    """Valid expressions parse into metric, aggregate, op, threshold (seconds / fraction)."""
    slo = parse_slo(text)
    metric, agg, op, threshold, q, ratio = fields
    assert (slo.expr, slo.metric, slo.agg, slo.op, slo.q, slo.ratio) == (
        text,
        metric,
        agg,
        op,
        q,
        ratio,
    )
    assert slo.threshold == pytest.approx(threshold, rel=1e-12)


FORM = (
    "expected METRIC[:AGG] OP VALUE[UNIT], e.g. latency:p99<150ms"
    " (OP: < <= > >=; units: us ms s min h %)"
)
AGGS = "pNN (p50, p99, p99.9), pNN/pNN, mean, min, max"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("latency:p99<<150ms", f"bad SLO 'latency:p99<<150ms': {FORM}"),
        ("latency:p99 = 150ms", f"bad SLO 'latency:p99 = 150ms': {FORM}"),
        ("", f"bad SLO '': {FORM}"),
        (
            "latency<150ms",
            "bad SLO 'latency<150ms': latency needs an aggregate, e.g. latency:p99;"
            f" allowed: {AGGS}",
        ),
        (
            "latency:p99<150",
            "bad SLO 'latency:p99<150': latency:p99 needs a time unit: us, ms, s, min or h",
        ),
        (
            "latency:p99<150 mins",
            "bad SLO 'latency:p99<150 mins': unknown unit 'mins'; allowed: us, ms, s, min, h, %",
        ),
        ("latency:avg<1s", f"bad SLO 'latency:avg<1s': 'avg' is not an aggregate; allowed: {AGGS}"),
        (
            "latency:p100<1s",
            "bad SLO 'latency:p100<1s': percentile 'p100' must lie strictly between p0 and p100",
        ),
        ("latency:p99/p50<1ms", "bad SLO 'latency:p99/p50<1ms': a ratio p99/p50 takes no unit"),
        ("errors:rate<1ms", "bad SLO 'errors:rate<1ms': a rate takes no unit or %, not 'ms'"),
        ("errors:p99<0.1", "bad SLO 'errors:p99<0.1': errors takes only the aggregate 'rate'"),
        (
            "errors:rate<150%",
            "bad SLO 'errors:rate<150%': a rate lies between 0 and 1 (0% and 100%)",
        ),
        (
            "gpu_density:p99>1",
            "bad SLO 'gpu_density:p99>1': gpu_density takes no aggregate, e.g. gpu_density>=0.85",
        ),
        (
            "goodput>1s",
            "bad SLO 'goodput>1s': goodput is in requests per second and takes no unit",
        ),
    ],
)
def test_parse_invalid_exact_message(text: str, message: str) -> None:
    """A bad expression raises UsageError with one line quoting it and saying what is allowed."""
    with pytest.raises(UsageError) as caught:
        parse_slo(text)
    assert str(caught.value) == message
    assert "\n" not in str(caught.value)


def test_unknown_metric_lists_known_metrics() -> None:
    """An unknown metric names itself and every known metric."""
    with pytest.raises(UsageError) as caught:
        parse_slo("latncy:p99<1s")
    text = str(caught.value)
    assert text.startswith("bad SLO 'latncy:p99<1s': unknown metric 'latncy'; known: latency, ")
    for name in ("ttft", "dispatch_jitter", "status_<code>", "errors", "gpu_density", "goodput"):
        assert name in text


def test_usage_error_exit_code() -> None:
    """A bad SLO is a usage error: exit code 2."""
    with pytest.raises(UsageError) as caught:
        parse_slos(["latency:p99<150ms", "nonsense"])
    assert caught.value.exit_code == 2


def test_goodput_bounds_are_upper_bounds_on_per_request_metrics() -> None:
    """Only < / <= SLOs on per-request durations bound goodput; ratios and rates do not."""
    slos = parse_slos(
        [
            "latency:p99<150ms",
            "ttft:p50<=20ms",
            "latency:p99/p50<2",
            "errors:rate<0.01",
            "tpot:p50>1ms",
        ]
    )
    assert goodput_bounds(slos) == [("latency", "<", 0.15), ("ttft", "<=", 0.02)]


# --- evaluation --------------------------------------------------------------------------

ONE_TO_THOUSAND = build_samples(list(np.arange(1, 1001)))  # latencies 1..1000 ms, p99 = 990 ms
EVIDENCE = Evidence(duration_s=10.0)


def evaluate(text: str, samples=ONE_TO_THOUSAND, evidence: Evidence = EVIDENCE) -> SloRecord:
    return evaluate_slo(parse_slo(text), build_frame(samples), evidence)


def test_percentile_pass_when_ci_below_threshold() -> None:
    """p99 of 1..1000 ms is 990 ms with CI [x_(983), x_(997)] = [983, 997] ms: < 1 s passes."""
    result = evaluate("latency:p99<1s")
    assert result.verdict == "pass"
    assert result.value == pytest.approx(0.990)
    assert (result.ci_low, result.ci_high) == (pytest.approx(0.983), pytest.approx(0.997))
    assert result.n == 1000
    assert result.message == "p99 = 0.99 s, 95% CI [0.983 s, 0.997 s] (n = 1,000) < 1 s: pass"


def test_percentile_fail_when_ci_above_threshold() -> None:
    """CI [983, 997] ms lies wholly above 900 ms: fail."""
    result = evaluate("latency:p99<900ms")
    assert result.verdict == "fail"
    assert "not < 900 ms: fail" in result.message


def test_percentile_inconclusive_says_how_many_more_samples() -> None:
    """992 ms lies inside the CI: inconclusive, with an estimate of the samples that decide."""
    result = evaluate("latency:p99<992ms")
    assert result.verdict == "inconclusive"
    assert result.samples_needed is not None and result.samples_needed > 0
    assert f"about {result.samples_needed:,} more samples would decide" in result.message


def test_p99_of_too_few_samples_is_inconclusive() -> None:
    """100 fast requests give a p99 with no finite upper bound: inconclusive, not pass."""
    result = evaluate("latency:p99<1s", build_samples([5.0] * 100))
    assert result.verdict == "inconclusive"
    assert result.ci_high is None
    assert "+inf" in result.message


def test_unavailable_metric_is_inconclusive_with_reason() -> None:
    """No timing headers: server_queue has no value; the gate says why instead of using 0."""
    result = evaluate("server_queue:p99<1ms")
    assert result.verdict == "inconclusive"
    assert result.value is None
    assert result.message == (
        "server_queue unavailable: the target sent no"
        " X-Request-Received-Time/X-Request-Dispatch-Time headers"
    )


def test_error_rate_wilson() -> None:
    """0 errors of 1000 pass 'errors:rate<1%' (Wilson high 0.38%); 50 of 1000 fail it."""
    assert evaluate("errors:rate<1%").verdict == "pass"
    failing = build_samples(
        [10.0] * 1000, status=[503] * 50 + [200] * 950, error=["http_503"] * 50 + [None] * 950
    )
    result = evaluate("errors:rate<1%", failing)
    assert result.verdict == "fail"
    assert result.value == pytest.approx(0.05)
    assert result.ci_low == pytest.approx(0.038130, abs=1e-6)  # by hand: 0.051722 - 0.013592
    assert evaluate("status_503:rate<0.1", failing).verdict == "pass"
    no_429 = evaluate("status_429:rate<0.001", failing)  # 0 of 1000: Wilson high 0.38%
    assert no_429.verdict == "inconclusive"
    assert no_429.samples_needed is not None and 2800 <= no_429.samples_needed <= 2900


def test_ratio_uses_worst_class_with_enough_samples() -> None:
    """Class 'a' (1..200 ms): p99/p50 = 198/100; class 'b' has 50 samples and is skipped."""
    latencies = list(range(1, 201)) + [1.0] * 49 + [1000.0]
    samples = build_samples(latencies, request_class=["a"] * 200 + ["b"] * 50)
    result = evaluate("latency:p99/p50<=1.15", samples)
    assert result.verdict == "fail"
    assert result.value == pytest.approx(1.98)
    assert "worst class 'a'" in result.message and "95% CI [1.658, +inf]" in result.message
    # 200 samples cannot bound a p99 from above: "< 2" is not decided by a point estimate
    assert evaluate("latency:p99/p50<2", samples).verdict == "inconclusive"


def test_ratio_interval_by_hand() -> None:
    """1..10,000 ms: p99/p50 = 9900/5000. Each percentile's CI at 97.5% (both at once: 95%)
    has ranks 9877..9923 (p99) and 4888..5113 (p50): [9877/5113, 9923/4888]."""
    values = np.arange(1, 10_001) / 1000
    assert ratio_interval(values, 0.99, 0.5) == pytest.approx((1.98, 9877 / 5113, 9923 / 4888))
    samples = build_samples(list(range(1, 10_001)))
    assert evaluate("latency:p99/p50<2.1", samples).verdict == "pass"
    assert evaluate("latency:p99/p50<=1.9", samples).verdict == "fail"
    straddling = evaluate("latency:p99/p50<2", samples)
    assert straddling.verdict == "inconclusive"
    assert (straddling.ci_low, straddling.ci_high) == pytest.approx((9877 / 5113, 9923 / 4888))


def test_durations_take_minutes_and_hours() -> None:
    assert parse_slo("latency:p99<2min").threshold == pytest.approx(120.0)
    assert parse_slo("ttft:max<=1h").threshold == pytest.approx(3600.0)


def test_ratio_without_enough_samples_is_unavailable() -> None:
    """No class has 100 samples: the ratio is inconclusive, not computed from a handful."""
    result = evaluate("latency:p99/p50<2", build_samples([1.0] * 99))
    assert result.verdict == "inconclusive"
    assert result.message.endswith(
        "no request class has 100 or more samples; lower [validity] min_ratio_samples or"
        " --min-ratio-samples, or run longer"
    )


def test_dispatch_jitter_max() -> None:
    """Window 1 alternates 0 / 2 ms dispatch delay (std 1 ms); window 2 is flat (std 0)."""
    start_epoch_ns = 1_700_000_000_123_456_789
    samples = build_samples([10.0] * 200)
    delay_ns = np.array([0, 2 * MS] * 50 + [1 * MS] * 100)
    send = samples["t_send"].to_numpy()
    samples["srv_start"] = (start_epoch_ns + send + delay_ns) / 1e9
    frame = build_frame(samples, start_epoch_ns=start_epoch_ns)
    slo = parse_slo("dispatch_jitter:max<200us")
    result = evaluate_slo(slo, frame, EVIDENCE)
    assert result.verdict == "fail"
    assert result.value == pytest.approx(0.001, abs=1e-6)
    assert evaluate_slo(parse_slo("dispatch_jitter:max<2ms"), frame, EVIDENCE).verdict == "pass"


def test_gpu_density_from_telemetry() -> None:
    """gpu_density comes from telemetry; without it the gate is inconclusive."""
    with_gpu = Evidence(duration_s=1.0, telemetry={"gpu_density": 0.9})
    assert evaluate("gpu_density>=0.85", evidence=with_gpu).verdict == "pass"
    assert evaluate("gpu_density>=95%", evidence=with_gpu).verdict == "fail"
    result = evaluate("gpu_density>=0.85")
    assert result.verdict == "inconclusive"
    assert "no GPU telemetry" in result.message


def test_error_adjusted_percentile_lands_on_failure() -> None:
    """2% of requests time out: the error-adjusted p99 is +inf and fails any bound."""
    samples = build_samples(
        [10.0] * 1000, status=[0] * 20 + [200] * 980, error=["timeout"] * 20 + [None] * 980
    )
    result = evaluate("latency_error_adjusted:p99<1s", samples)
    assert result.verdict == "fail"
    assert result.value == "inf"  # summary.json's infinity
    assert evaluate("latency:p99<1s", samples).verdict == "pass"


def test_run_verdict() -> None:
    """invalid beats fail beats inconclusive beats pass."""

    def result(verdict: SloVerdict) -> SloRecord:
        return SloRecord(
            expr="x",
            metric="x",
            value=1.0,
            threshold=1.0,
            verdict=verdict,
            ci_low=None,
            ci_high=None,
            n=0,
            samples_needed=None,
            message="",
        )

    assert run_verdict(False, [result("pass")]) == "invalid"
    assert run_verdict(True, [result("pass"), result("fail"), result("inconclusive")]) == "fail"
    assert run_verdict(True, [result("pass"), result("inconclusive")]) == "inconclusive"
    assert run_verdict(True, [result("pass")]) == "pass"
    assert run_verdict(True, []) == "pass"
