"""http.*: connection behaviour: keep-alive, and HTTP/2 when the endpoint speaks it.

Each check's requests are a phase of its own (PHASES), on a client of its own: the client's
connection count and protocol are what they judge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zqbench.conform.evidence import Evidence
from zqbench.conform.model import Check, CheckResult, Phase, failed, passed, skipped
from zqbench.conform.observations import Observations
from zqbench.target.control import ControlClient

if TYPE_CHECKING:
    from zqbench.conform.context import Sender


def sequential_requests(sender: Sender, _: Observations) -> tuple[list[Evidence], int]:
    """Four requests, streamed and not, on a fresh client: (exchanges, connections opened)."""
    t = sender.target
    reqs = [
        t.get("/v1/models"),
        t.generate(t.api, stream=True, max_tokens=4),
        t.generate(t.api, stream=False, max_tokens=4),
        t.get("/v1/models"),
    ]
    with ControlClient(timeout_s=t.options.timeout_s) as client:
        exchanges = [sender.send(r, client) for r in reqs]
        return exchanges, client.connections_opened


def over_http2(sender: Sender, _: Observations) -> tuple[Evidence, Evidence | None]:
    """GET /v1/models over HTTP/2, then (when that worked) a streamed generation."""
    t = sender.target
    with ControlClient(timeout_s=t.options.timeout_s, http2=True) as client:
        models = sender.send(t.get("/v1/models"), client)
        if models.status == 0 or models.http_version != "HTTP/2":
            return models, None
        return models, sender.send(t.generate(t.api, stream=True, max_tokens=4), client)


def keep_alive(obs: Observations) -> CheckResult:
    exchanges, opened = obs.get("http.keep_alive", tuple)
    for ex in exchanges:
        if ex.status == 0:
            return failed(f"{ex.method} {ex.path} failed: {ex.error}", response=ex.evidence())
    closing = [ex for ex in exchanges if ex.headers.get("connection", "").lower() == "close"]
    evidence = {"requests": len(exchanges), "connections_opened": opened}
    if closing:
        return failed(
            "a response said Connection: close",
            response=closing[0].evidence(body=False),
            **evidence,
        )
    if opened != 1:
        return failed(
            f"{len(exchanges)} sequential requests needed {opened} connections", **evidence
        )
    return passed(f"{len(exchanges)} requests (streamed and not) on one connection", **evidence)


def http2(obs: Observations) -> CheckResult:
    how = "ALPN" if obs.target.origin.tls else "h2c prior knowledge"
    models, stream = obs.get("http.h2", tuple)
    if stream is None:
        got = models.error or models.http_version
        if obs.target.options.expect_http2:
            return failed(f"HTTP/2 ({how}) did not work: {got}", response=models.evidence())
        return skipped(
            f"the endpoint does not speak HTTP/2 over {how} ({got}); --expect-http2 requires it"
        )
    shape = obs.target.dialect().shapes.stream
    problems = shape([e for e, _ in stream.events]) if stream.status == 200 else []
    if stream.status != 200 or problems:
        why = problems[0] if problems else f"status {stream.status or stream.error}"
        return failed(f"a streamed request over HTTP/2: {why}", response=stream.evidence())
    return passed(f"HTTP/2 over {how}: /v1/models and a streamed generation")


PHASES = [Phase("http.keep_alive", sequential_requests), Phase("http.h2", over_http2)]
CHECKS = [
    Check(
        "http.1",
        "Sequential requests reuse one connection (keep-alive is honoured).",
        keep_alive,
        ("http.keep_alive",),
    ),
    Check(
        "http.2",
        "HTTP/2 works when the endpoint speaks it (h2c prior knowledge or ALPN).",
        http2,
        ("http.h2",),
    ),
]
