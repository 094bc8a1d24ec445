"""Small bounds for runs against the in-process fake server (about 1.5 s a run)."""

from __future__ import annotations

import dataclasses
from typing import Any

from zqbench.conform import CheckOutcome, ConformOptions, ConformReport


def fake_options(url: str, **overrides: Any) -> ConformOptions:
    options = ConformOptions(
        target=url,
        apis=("anthropic", "openai"),
        expect_headers=("x-scheduler=zero-queue",),
        low_load_requests=8,
        slope_steps=(1, 2, 4, 8),
        slope_rounds=3,
        slope_max_tokens=16,
        overload_concurrency=12,  # past 2 slots + the hidden_queue fault's 6 places
        overload_max_tokens=32,
        recovery_s=1.0,
        body_limit_bytes=1024 * 1024,
    )
    return dataclasses.replace(options, **overrides)


def failing(report: ConformReport) -> dict[str, str]:
    return {o.id: o.reason for o in report.outcomes if o.status == "fail"}


def outcome(report: ConformReport, check_id: str) -> CheckOutcome:
    (found,) = [o for o in report.outcomes if o.id == check_id]
    return found
