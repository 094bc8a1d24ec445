"""Small bounds for runs against the in-process fake server (about 1.5 s a run)."""

from __future__ import annotations

import dataclasses
from typing import Any

from zqbench.conform import CheckOutcome, ConformOptions, ConformReport
from zqbench.conform.evidence import Evidence, Recorder, Request
from zqbench.dialects import get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec
from zqbench.transport.base import Exchange, TransportError

MS = 1_000_000  # ns


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


def recorded(
    api: str, pieces: list[bytes], *, status: int = 200, error: TransportError | None = None
) -> Evidence:
    """A streamed request of `api` (64 tokens asked) answered with `pieces`, one a
    millisecond from t=11 ms after the send (t=0), recorded as conform records it; the
    answer ends at 99 ms, unless it failed with `error`."""
    dialect = get_dialect(api, DialectConfig(model="m"))
    spec = RequestSpec("conform", "p", 64)
    rec = Recorder(Request(dialect.build(spec), lambda hook: dialect.parser(spec, on_event=hook)))
    rec.on_headers(status, {"content-type": "text/event-stream"}, 10)
    for t, piece in enumerate(pieces, start=11):
        rec.on_data(piece, t * MS)
    if error is None:
        rec.on_end(99 * MS)
    return rec.finish(Exchange(t_send=0, t_end=99 * MS, http_version="1.1", error=error))


def failing(report: ConformReport) -> dict[str, str]:
    return {o.id: o.reason for o in report.outcomes if o.status == "fail"}


def outcome(report: ConformReport, check_id: str) -> CheckOutcome:
    (found,) = [o for o in report.outcomes if o.id == check_id]
    return found


INSTRUMENTATION = ["zeroqueue.1", "zeroqueue.2", "zeroqueue.3", "zeroqueue.4"]


def judged_on_behaviour(doc: dict[str, Any], stdout: str) -> None:
    """An engine's conform.json and terminal: it lacks the reference server's instrumentation,
    which skips as such rather than failing it, and what fails is behaviour."""
    checks = {c["id"]: c for c in doc["checks"]}
    assert doc["summary"]["not_instrumented"] == INSTRUMENTATION
    assert all(checks[i]["reason"].startswith("not instrumented: ") for i in INSTRUMENTATION)
    assert {c["kind"] for c in checks.values() if c["status"] == "fail"} == {"behaviour"}
    assert f"not instrumented: {', '.join(INSTRUMENTATION)} unmeasured" in stdout
