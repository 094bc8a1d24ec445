"""A small real summary for the renderers, made by summarize() from constructed samples."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.metrics.conftest import build_samples
from zqbench.load.spans import StageInfo
from zqbench.metrics.summarize import RunInfo, summarize
from zqbench.summary import Summary


def make_samples_frame(*, failures: int = 0, lag_ms: float = 0.0) -> pd.DataFrame:
    """1000 requests with latencies 1..1000 ms over two stages, `failures` of them 503."""
    latencies = list(range(1, 1001))
    samples = build_samples(
        latencies,
        stage=[0] * 500 + [1] * 500,
        status=[503] * failures + [200] * (1000 - failures),
        error=["http_503"] * failures + [None] * (1000 - failures),
    )
    samples["t_intended"] = samples["t_send"] - int(lag_ms * 1e6)
    return samples


def make_summary(slos: list[str], *, failures: int = 0, lag_ms: float = 0.0) -> Summary:
    """The summary of `make_samples_frame`'s requests."""
    samples = make_samples_frame(failures=failures, lag_ms=lag_ms)
    run = RunInfo(
        scenario="burst",
        target="http://127.0.0.1:8000/v1",
        api="anthropic",
        started_at="2026-11-29T10:45:01Z",
        start_monotonic_ns=1,
        start_epoch_ns=1_764_412_345_000_000_000,
        duration_s=10.0,
        scenario_config={"name": "burst", "headers": {"x-api-key": "sk-ant-secret-123456"}},
        environment={"host": "ci"},
        stages=(StageInfo("warm", 0.0, 5.0), StageInfo("burst", 5.0, 10.0)),
    )
    return summarize(samples, run=run, slos=slos)


@pytest.fixture
def summary_factory():
    return make_summary
