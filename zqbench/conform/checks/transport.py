"""http.*: connection behaviour: keep-alive, and HTTP/2 when the endpoint speaks it."""

from __future__ import annotations

from zqbench.conform.context import Context
from zqbench.conform.model import Check, CheckResult, failed, passed, skipped
from zqbench.target.control import ControlClient


def keep_alive(ctx: Context) -> CheckResult:
    reqs = [
        ctx.get("/v1/models"),
        ctx.generate(ctx.api, stream=True, max_tokens=4),
        ctx.generate(ctx.api, stream=False, max_tokens=4),
        ctx.get("/v1/models"),
    ]
    with ControlClient(timeout_s=ctx.options.timeout_s) as client:
        exchanges = [ctx.send(r, client) for r in reqs]
        opened = client.connections_opened
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


def http2(ctx: Context) -> CheckResult:
    how = "ALPN" if ctx.origin.tls else "h2c prior knowledge"
    expect = ctx.options.expect_http2
    with ControlClient(timeout_s=ctx.options.timeout_s, http2=True) as client:
        models = ctx.send(ctx.get("/v1/models"), client)
        if models.status == 0 or models.http_version != "HTTP/2":
            got = models.error or models.http_version
            if expect:
                return failed(f"HTTP/2 ({how}) did not work: {got}", response=models.evidence())
            return skipped(
                f"the endpoint does not speak HTTP/2 over {how} ({got}); --expect-http2 requires it"
            )
        stream = ctx.send(ctx.generate(ctx.api, stream=True, max_tokens=4), client)
    shape = ctx.dialect().shapes.stream
    problems = shape([e for e, _ in stream.events]) if stream.status == 200 else []
    if stream.status != 200 or problems:
        why = problems[0] if problems else f"status {stream.status or stream.error}"
        return failed(f"a streamed request over HTTP/2: {why}", response=stream.evidence())
    return passed(f"HTTP/2 over {how}: /v1/models and a streamed generation")


CHECKS = [
    Check(
        "http.1", "Sequential requests reuse one connection (keep-alive is honoured).", keep_alive
    ),
    Check(
        "http.2", "HTTP/2 works when the endpoint speaks it (h2c prior knowledge or ALPN).", http2
    ),
]
