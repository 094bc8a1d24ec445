"""errors.*: bad requests get the right 4xx in the dialect's error JSON, and never a 5xx.

Requests go to the first API of --api. Each check's requests are a phase of the plan
(PHASES, after the load phases and the settling: phases.py); the check judges what they got.
The malformed corpus (errors.7) is fixed, so two runs send the same bytes; each entry is
named in the evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from zqbench.conform.context import Target
from zqbench.conform.evidence import Request
from zqbench.conform.model import (
    Cases,
    Check,
    CheckResult,
    Phase,
    failed,
    passed,
    sequential,
    skipped,
)
from zqbench.conform.observations import Named, Observations
from zqbench.dialects.base import Dialect, RequestSpec
from zqbench.transport.base import HttpRequest

WRONG_KEY = "zqbench-conform-wrong-key"


def _valid(t: Target) -> dict[str, Any]:
    """The body the dialect builds for a short generation; each case breaks one thing in it."""
    spec = RequestSpec("conform", "Hello", t.options.max_tokens, stream=False)
    body: dict[str, Any] = json.loads(t.dialect().build(spec).body)
    return body


def _post(t: Target, body: bytes | dict[str, Any], dialect: Dialect | None = None) -> Request:
    """`body` to the generation route, with the headers of `dialect` (default: the run's)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    d = dialect or t.dialect()
    return Request(HttpRequest("POST", d.path, d.headers, raw))


def _expect(t: Target, cases: Named, status: int) -> CheckResult:
    """Every case got `status` with a body in the dialect's error shape (no case: a skip)."""
    if not cases:
        return skipped("no request to judge (the dialect names none for this check)")
    for name, ex in cases:
        if ex.status != status:
            got = ex.status or ex.error
            return failed(
                f"{name}: got {got}, expected {status}", case=name, response=ex.evidence()
            )
        problem = t.dialect().error_problem(ex.json())
        if problem:
            return failed(
                f"{name}: {status} but not {t.api} error JSON ({problem})",
                case=name,
                response=ex.evidence(),
            )
    return passed(f"{len(cases)} requests: {status} with {t.api} error JSON")


def missing_field(t: Target) -> Cases:
    cases = []
    for name in t.dialect().required_fields:
        body = _valid(t)
        del body[name]
        cases.append((f"without {name}", _post(t, body)))
    return cases


def invalid_field(t: Target) -> Cases:
    variants: list[tuple[str, dict[str, Any]]] = [
        ("max_tokens is a string", {"max_tokens": "ten"}),
        ("max_tokens is 0", {"max_tokens": 0}),
        ("max_tokens is negative", {"max_tokens": -5}),
        ("messages is empty", {"messages": []}),
        ("messages is an object", {"messages": {"role": "user"}}),
        ("role is unknown", {"messages": [{"role": "robot", "content": "hi"}]}),
        ("content is a number", {"messages": [{"role": "user", "content": 5}]}),
    ]
    return [(name, _post(t, {**_valid(t), **change})) for name, change in variants]


def unknown_model(t: Target) -> Cases:
    body = {**_valid(t), "model": "zqbench-conform-no-such-model"}
    return [("unknown model", _post(t, body))]


def oversize(t: Target) -> Cases:
    # A well-formed body (one long prompt) just past the limit, so only its size is wrong.
    limit = t.options.body_limit_bytes
    body = _valid(t)
    skeleton = len(json.dumps(body).encode())
    body["messages"][0]["content"] = "a" * (limit - skeleton + 1024)
    return [(f"a {len(json.dumps(body))}-byte body", _post(t, body))]


def wrong_method(t: Target) -> Cases:
    dialect = t.dialect()
    return [
        ("GET on the generation route", Request(HttpRequest("GET", dialect.path, dialect.headers))),
        ("DELETE /v1/models", Request(HttpRequest("DELETE", "/v1/models", dialect.headers))),
    ]


def auth_required(t: Target) -> Cases:
    if not t.options.expect_auth:
        return []  # the check skips: nothing to send
    body = _valid(t)
    return [
        ("no key", _post(t, body, t.keyed(None))),
        ("a wrong key", _post(t, body, t.keyed(WRONG_KEY))),
    ]


def corpus(t: Target) -> Cases:
    """Malformed requests, each named; none of them may get a 5xx."""
    valid = _valid(t)

    def variant(**change: Any) -> bytes:
        return json.dumps({**valid, **change}).encode()

    def message(content: Any, role: Any = "user") -> bytes:
        return variant(messages=[{"role": role, "content": content}])

    good = json.dumps(valid).encode()
    bodies = [
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
        ("invalid UTF-8 in the model", good.replace(t.model.encode(), b"\xc0\xaf")),
        ("deeply nested JSON", b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ("prompt past the context", message("x" * 200_000)),
        ("a 1 MB key", variant(**{"k" * 1_000_000: 1})),
    ]
    return [(name, _post(t, body)) for name, body in bodies]


def no_5xx(obs: Observations) -> CheckResult:
    bad = []
    statuses: dict[str, int] = {}
    for name, ex in obs.named("errors.7"):
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


def _judged(check_id: str, status: int) -> Callable[[Observations], CheckResult]:
    """Every request of the check's phase (named as the check) got `status`."""
    return lambda obs: _expect(obs.target, obs.named(check_id), status)


def _auth(obs: Observations) -> CheckResult:
    if not obs.target.options.expect_auth:
        return skipped("no key is required (pass --expect-auth to check 401)")
    return _expect(obs.target, obs.named("errors.6"), 401)


# id, statement, its requests (a phase named as the check), the status each must get
STATUSES: list[tuple[str, str, Callable[[Target], Cases], int]] = [
    ("errors.1", "A request missing a required field gets 400 in the dialect's error JSON.",
     missing_field, 400),
    ("errors.2", "A field of the wrong type or value gets 400 in the dialect's error JSON.",
     invalid_field, 400),
    ("errors.3", "An unknown model gets 404 in the dialect's error JSON.", unknown_model, 404),
    ("errors.4", "A body past the size limit gets 413 in the dialect's error JSON.", oversize, 413),
    ("errors.5", "A wrong method on a known route gets 405 in the dialect's error JSON.",
     wrong_method, 405),
]  # fmt: skip
AUTH = "Without a valid key the endpoint answers 401 (with --expect-auth)."
CORPUS = "No input of a fixed corpus of malformed requests gets a 5xx or no answer."
CHECKS = [
    *(Check(i, statement, _judged(i, status), (i,)) for i, statement, _, status in STATUSES),
    Check("errors.6", AUTH, _auth, ("errors.6",)),
    Check("errors.7", CORPUS, no_5xx, ("errors.7",)),
]
# After the load phases, once the endpoint is back at rest (phases.py).
BUILDS = [
    *((i, build) for i, _, build, _ in STATUSES),
    ("errors.6", auth_required),
    ("errors.7", corpus),
]
PHASES: list[Phase] = [sequential(i, build, ("settle.errors",)) for i, build in BUILDS]
