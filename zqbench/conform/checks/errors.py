"""errors.*: bad requests get the right 4xx in the dialect's error JSON, and never a 5xx.

Requests go to the first API of --api. The malformed corpus (errors.7) is fixed, so two runs
send the same bytes; each entry is named in the evidence.
"""

from __future__ import annotations

import json
from typing import Any

from zqbench.conform.context import Context
from zqbench.conform.evidence import Evidence, Request
from zqbench.conform.model import Check, CheckResult, failed, passed, skipped
from zqbench.dialects.base import Dialect, RequestSpec
from zqbench.transport.base import HttpRequest

WRONG_KEY = "zqbench-conform-wrong-key"


def _valid(ctx: Context) -> dict[str, Any]:
    """The body the dialect builds for a short generation; each case breaks one thing in it."""
    spec = RequestSpec("conform", "Hello", ctx.options.max_tokens, stream=False)
    body: dict[str, Any] = json.loads(ctx.dialect().build(spec).body)
    return body


def _post(ctx: Context, body: bytes | dict[str, Any], dialect: Dialect | None = None) -> Evidence:
    """`body` to the generation route, with the headers of `dialect` (default: the run's)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return ctx.send(ctx.post(raw, dialect))


def _expect(ctx: Context, cases: list[tuple[str, Evidence]], status: int) -> CheckResult:
    """Every case got `status` with a body in the dialect's error shape (no case: a skip)."""
    if not cases:
        return skipped("no request to judge (the dialect names none for this check)")
    for name, ex in cases:
        if ex.status != status:
            got = ex.status or ex.error
            return failed(
                f"{name}: got {got}, expected {status}", case=name, response=ex.evidence()
            )
        problem = ctx.dialect().error_problem(ex.json())
        if problem:
            return failed(
                f"{name}: {status} but not {ctx.api} error JSON ({problem})",
                case=name,
                response=ex.evidence(),
            )
    return passed(f"{len(cases)} requests: {status} with {ctx.api} error JSON")


def missing_field(ctx: Context) -> CheckResult:
    cases = []
    for name in ctx.dialect().required_fields:
        body = _valid(ctx)
        del body[name]
        cases.append((f"without {name}", _post(ctx, body)))
    return _expect(ctx, cases, 400)


def invalid_field(ctx: Context) -> CheckResult:
    variants: list[tuple[str, dict[str, Any]]] = [
        ("max_tokens is a string", {"max_tokens": "ten"}),
        ("max_tokens is 0", {"max_tokens": 0}),
        ("max_tokens is negative", {"max_tokens": -5}),
        ("messages is empty", {"messages": []}),
        ("messages is an object", {"messages": {"role": "user"}}),
        ("role is unknown", {"messages": [{"role": "robot", "content": "hi"}]}),
        ("content is a number", {"messages": [{"role": "user", "content": 5}]}),
    ]
    cases = []
    for name, change in variants:
        body = {**_valid(ctx), **change}
        cases.append((name, _post(ctx, body)))
    return _expect(ctx, cases, 400)


def unknown_model(ctx: Context) -> CheckResult:
    body = {**_valid(ctx), "model": "zqbench-conform-no-such-model"}
    return _expect(ctx, [("unknown model", _post(ctx, body))], 404)


def oversize(ctx: Context) -> CheckResult:
    # A well-formed body (one long prompt) just past the limit, so only its size is wrong.
    limit = ctx.options.body_limit_bytes
    body = _valid(ctx)
    skeleton = len(json.dumps(body).encode())
    body["messages"][0]["content"] = "a" * (limit - skeleton + 1024)
    ex = _post(ctx, body)
    result = _expect(ctx, [(f"a {len(json.dumps(body))}-byte body", ex)], 413)
    return result


def wrong_method(ctx: Context) -> CheckResult:
    dialect = ctx.dialect()
    requests = [
        ("GET on the generation route", HttpRequest("GET", dialect.path, dialect.headers)),
        ("DELETE /v1/models", HttpRequest("DELETE", "/v1/models", dialect.headers)),
    ]
    return _expect(ctx, [(name, ctx.send(Request(r))) for name, r in requests], 405)


def auth_required(ctx: Context) -> CheckResult:
    if not ctx.options.expect_auth:
        return skipped("no key is required (pass --expect-auth to check 401)")
    body = _valid(ctx)
    no_key = _post(ctx, body, ctx.keyed(None))
    wrong_key = _post(ctx, body, ctx.keyed(WRONG_KEY))
    return _expect(ctx, [("no key", no_key), ("a wrong key", wrong_key)], 401)


def _corpus(ctx: Context) -> list[tuple[str, bytes]]:
    """(name, body) of malformed requests; none of them may get a 5xx."""
    valid = _valid(ctx)

    def variant(**change: Any) -> bytes:
        return json.dumps({**valid, **change}).encode()

    def message(content: Any, role: Any = "user") -> bytes:
        return variant(messages=[{"role": role, "content": content}])

    good = json.dumps(valid).encode()
    return [
        ("empty body", b""),
        ("not JSON", b"this is not json"),
        ("truncated JSON", good[: len(good) // 2]),
        ("a JSON array", b"[1, 2, 3]"),
        ("JSON null", b"null"),
        ("a JSON string", b'"hello"'),
        ("trailing garbage", good + b"}}"),
        ("model is a number", variant(model=12)),
        ("model is null", variant(model=None)),
        ("max_tokens is a float", variant(max_tokens=5.5)),
        ("max_tokens is a boolean", variant(max_tokens=True)),
        ("max_tokens is huge", variant(max_tokens=10**30)),
        ("max_tokens is 1e400", good.replace(b'"max_tokens": ', b'"max_tokens": 1e400, "x": ')),
        ("temperature is huge", variant(temperature=1e308)),
        ("temperature is a string", variant(temperature="hot")),
        ("stream is a string", variant(stream="yes")),
        ("stop is a number", variant(stop_sequences=5, stop=5)),
        ("messages is a string", variant(messages="hi")),
        ("messages holds null", variant(messages=[None])),
        ("a message without content", variant(messages=[{"role": "user"}])),
        ("content is empty", message("")),
        ("content is a list of numbers", message([1, 2])),
        ("content block of unknown type", message([{"type": "hologram", "data": "x"}])),
        ("role is null", message("hi", role=None)),
        ("a NUL in the prompt", message("a\u0000b")),
        ("a lone surrogate escape", good.replace(b'"Hello"', b'"\\ud800"')),
        ("invalid UTF-8 in the prompt", good.replace(b"Hello", b"\xff\xfe\xc3")),
        ("invalid UTF-8 in the model", good.replace(ctx.model.encode(), b"\xc0\xaf")),
        ("deeply nested JSON", b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ("prompt past the context", message("x" * 200_000)),
        ("a 1 MB key", variant(**{"k" * 1_000_000: 1})),
    ]


def no_5xx(ctx: Context) -> CheckResult:
    bad = []
    statuses: dict[str, int] = {}
    for name, body in _corpus(ctx):
        ex = _post(ctx, body)
        statuses[name] = ex.status
        if ex.status >= 500 or ex.status == 0:
            bad.append((name, ex))
    if bad:
        name, ex = bad[0]
        return failed(
            f"{name}: {ex.status or ex.error} ({len(bad)} of {len(statuses)} inputs got a 5xx "
            "or no response)",
            failing=[n for n, _ in bad],
            response=ex.evidence(),
            statuses=statuses,
        )
    return passed(f"{len(statuses)} malformed requests, no 5xx", statuses=statuses)


CHECKS = [
    Check(
        "errors.1",
        "A request missing a required field gets 400 in the dialect's error JSON.",
        missing_field,
    ),
    Check(
        "errors.2",
        "A field of the wrong type or value gets 400 in the dialect's error JSON.",
        invalid_field,
    ),
    Check("errors.3", "An unknown model gets 404 in the dialect's error JSON.", unknown_model),
    Check("errors.4", "A body past the size limit gets 413 in the dialect's error JSON.", oversize),
    Check(
        "errors.5",
        "A wrong method on a known route gets 405 in the dialect's error JSON.",
        wrong_method,
    ),
    Check(
        "errors.6",
        "Without a valid key the endpoint answers 401 (with --expect-auth).",
        auth_required,
    ),
    Check(
        "errors.7",
        "No input of a fixed corpus of malformed requests gets a 5xx or no answer.",
        no_5xx,
    ),
]
