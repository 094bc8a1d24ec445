"""The live counts a worker keeps from its samples, and the estimates read from them."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from zqbench.dialects.base import TEXT, THINKING
from zqbench.exporter import live_slos
from zqbench.metrics.classify import ANSWERS, answer_of
from zqbench.metrics.slo import parse_slo
from zqbench.samples.live_counts import (
    BUCKETS_S,
    MAX_CLASSES,
    LiveCounts,
    bucket_quantile,
    merge,
    status_label,
)
from zqbench.samples.sample import Sample

MS = 1_000_000


def _sample(i: int, *, stage: int, cls: str, status: int, error: str | None, latency_ms: float):
    t_send = i * MS
    end = t_send + int(latency_ms * MS)
    return Sample(
        request_id=i, worker=0, stage=stage, request_class=cls, t_intended=t_send - 2 * MS,
        t_send=t_send, t_headers=t_send + MS, t_first_token=t_send + int(latency_ms * MS / 4),
        t_last_token=end, t_end=end, status=status, error=error, prompt_tokens=8,
        output_tokens=4, tokens_from_usage=True, itl_mean_ns=None, itl_p99_ns=None,
        itl_max_ns=None, n_chunks=4, srv_received=None, srv_dispatch=None, srv_start=None,
        srv_gpu_ms=None, http_version="1.1", bytes_in=100, retry_after_s=None,
    )  # fmt: skip


def _samples(n: int, seed: int = 1) -> list[Sample]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        status, error = rng.choice(
            [(200, None)] * 6 + [(529, None), (0, "timeout"), (500, None), (0, "interrupted")]
        )
        out.append(
            _sample(
                i,
                stage=rng.randrange(3),
                cls=rng.choice(["short", "long"]),
                status=status,
                error=error,
                latency_ms=rng.lognormvariate(3, 1),
            )
        )
    return out


def test_counts_are_the_samples_by_stage_class_status_and_outcome() -> None:
    samples = _samples(2000)
    counts = LiveCounts()
    for s in samples:
        counts.record(s)
    snap = counts.snapshot()
    assert snap.total() == 2000
    for (stage, cls, status, result), n in snap.requests.items():
        assert n == sum(
            s.stage == stage and s.request_class == cls and str(s.status) == status
            and ANSWERS[answer_of(s.status, s.error)] == result
            for s in samples
        )  # fmt: skip
    assert {k[3] for k in snap.requests} == {"ok", "refused", "timed_out", "failed", "interrupted"}
    ok = [s for s in samples if s.status == 200]
    lat = [h for (m, _, _), h in snap.histograms.items() if m == "latency"]
    assert sum(sum(h.bins) for h in lat) == len(ok)
    assert sum(h.sum_s for h in lat) == pytest.approx(sum((s.t_end - s.t_send) / 1e9 for s in ok))
    ttr = [h for (m, _, _), h in snap.histograms.items() if m == "time_to_reject"]
    assert sum(sum(h.bins) for h in ttr) == sum(s.status == 529 for s in samples)
    lags = [h for (m, _, _), h in snap.histograms.items() if m == "schedule_lag"]
    assert sum(h.sum_s for h in lags) == pytest.approx(2000 * 0.002)


def test_a_refusal_in_disguise_is_counted_by_name_and_timed_as_a_refusal() -> None:
    counts = LiveCounts()
    for i, (status, error) in enumerate(
        [(200, "refused_in_stream")] * 3 + [(503, None), (200, "stream_error"), (200, None)]
    ):
        counts.record(_sample(i, stage=0, cls="c", status=status, error=error, latency_ms=4.0))
    snap = counts.snapshot()
    assert snap.requests == {
        (0, "c", "200", "refused_in_stream"): 3,
        (0, "c", "503", "refused"): 1,
        (0, "c", "200", "failed"): 1,
        (0, "c", "200", "ok"): 1,
    }
    assert sum(snap.histograms[("time_to_reject", 0, "c")].bins) == 4
    assert sum(snap.histograms[("latency", 0, "c")].bins) == 1


def test_merging_two_workers_equals_counting_them_together() -> None:
    samples = _samples(1000)
    a, b, both = LiveCounts(), LiveCounts(), LiveCounts()
    for i, s in enumerate(samples):
        (a if i % 2 else b).record(s)
        both.record(s)
    merged, whole = merge([a.snapshot(), b.snapshot()]), both.snapshot()
    assert merged.requests == whole.requests
    assert merged.histograms.keys() == whole.histograms.keys()
    for key, h in whole.histograms.items():
        assert merged.histograms[key].bins == h.bins
        assert merged.histograms[key].sum_s == pytest.approx(h.sum_s)


def test_a_hostile_server_cannot_grow_the_labels() -> None:
    """Every status 0-999 and 10,000 class names: the labels stay a bounded set."""
    labels = {status_label(code) for code in range(1000)}
    assert labels == {
        "0", "200", "201", "204", "400", "401", "403", "404", "408", "409", "413", "422",
        "429", "500", "502", "503", "504", "529", "1xx", "2xx", "3xx", "4xx", "5xx", "other",
    }  # fmt: skip
    counts = LiveCounts()
    for i in range(10_000):
        counts.record(_sample(i, stage=0, cls=f"c{i}", status=200, error=None, latency_ms=5))
    classes = {cls for (_, cls, _, _) in counts.snapshot().requests}
    assert len(classes) == MAX_CLASSES + 1 and "other" in classes


def test_a_bucket_quantile_is_within_its_bucket_of_the_exact_one() -> None:
    rng = np.random.default_rng(3)
    values = np.sort(rng.lognormal(-4, 1.2, 5000))
    bins = [0] * (len(BUCKETS_S) + 1)
    for v in values:
        bins[int(np.searchsorted(BUCKETS_S, v, side="left"))] += 1
    for q in (0.5, 0.9, 0.99):
        exact = float(values[math.ceil(q * len(values)) - 1])
        i = int(np.searchsorted(BUCKETS_S, exact, side="left"))
        low, high = (BUCKETS_S[i - 1] if i else 0.0), BUCKETS_S[i]
        estimate = bucket_quantile(bins, q)
        assert estimate is not None and low <= estimate <= high, (q, exact, estimate)
    assert bucket_quantile([0] * len(bins), 0.5) is None


def test_live_slo_estimates_from_the_counts() -> None:
    samples = _samples(3000, seed=7)
    counts = LiveCounts()
    for s in samples:
        counts.record(s)
    snap = counts.snapshot()
    errors = live_slos.estimate(parse_slo("errors:rate<0.5"), snap)
    assert errors == pytest.approx(sum(s.status != 200 for s in samples) / 3000)
    s529 = live_slos.estimate(parse_slo("status_529:rate<1%"), snap)
    assert s529 == pytest.approx(sum(s.status == 529 for s in samples) / 3000)
    assert live_slos.estimate(parse_slo("status_418:rate<1%"), snap) is None  # folded in 4xx
    ok = sorted((s.t_end - s.t_send) / 1e9 for s in samples if s.status == 200)
    p99 = live_slos.estimate(parse_slo("latency:p99<1s"), snap)
    exact = ok[math.ceil(0.99 * len(ok)) - 1]
    assert p99 is not None and abs(p99 - exact) / exact < 0.5
    mean = live_slos.estimate(parse_slo("latency:mean<1s"), snap)
    assert mean == pytest.approx(sum(ok) / len(ok))
    ratio = live_slos.estimate(parse_slo("latency:p99/p50<=1.15"), snap)
    assert ratio is not None and ratio > 1.15
    assert live_slos.holds(parse_slo("latency:p99/p50<=1.15"), ratio) is False
    assert live_slos.estimate(parse_slo("goodput>1"), snap) is None


def test_ttfa_is_timed_where_the_answer_came_after_thinking_or_as_a_call() -> None:
    """A thinking answer's first answer token 30 ms after its send; a plain one's first
    token is its answer (no ttfa of its own, as in summary.json)."""
    counts = LiveCounts()
    plain = _sample(0, stage=0, cls="a", status=200, error=None, latency_ms=40)
    thought = _sample(1, stage=0, cls="a", status=200, error=None, latency_ms=40)._replace(
        carried=THINKING | TEXT,
        t_first_answer=1 * MS + 30 * MS,
    )
    counts.record(plain)
    counts.record(thought)
    h = counts.snapshot().histograms
    assert sum(h["ttft", 0, "a"].bins) == 2
    assert sum(h["ttfa", 0, "a"].bins) == 1 and h["ttfa", 0, "a"].sum_s == pytest.approx(0.03)
