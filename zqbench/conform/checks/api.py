"""api.<name>.* for each registered dialect (api.anthropic.*, api.openai.*): does the
endpoint speak the API the SDKs expect?

Every group has the same five checks, built by `api_checks(api)`:
    .1 the non-streamed response's JSON shape      .2 the stream's event order and shapes
    .3 usage output tokens match the text events   .4 stop_reason/finish_reason at max_tokens
    .5 GET /v1/models

What a response says (its text events, usage, stop reason) is what the dialect's parser,
the one `zqbench run` measures with, reads from it. .3 and .4 judge a stream only when it
has the API's shape: a stream out of order is .2's failure, not theirs. The shapes, the
stop-reason facts and .3's statement are the dialect's own (`zqbench.dialects`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zqbench.conform.evidence import Evidence, excerpt
from zqbench.conform.model import Check, CheckResult, Phase, failed, passed, sequential, skipped
from zqbench.conform.observations import Observations
from zqbench.dialects import DIALECTS
from zqbench.dialects.base import Dialect

if TYPE_CHECKING:
    from zqbench.conform.context import Target
    from zqbench.conform.evidence import Request
    from zqbench.conform.model import Cases

STREAM_EXCERPT = 16 * 1024  # api.<name>.3 keeps this much of the stream it counted


def phases(api: str) -> list[Phase]:
    """The requests api.<api>.* judge: one non-streamed (.1, .4), one streamed (.2-.4),
    GET /v1/models (.5); none when --api does not include `api`."""

    def one(build: Callable[[Target], Request]) -> Callable[[Target], Cases]:
        return lambda t: [(api, build(t))] if api in t.options.apis else []

    return [
        sequential(f"api.{api}.body", one(lambda t: t.generate(api, stream=False))),
        sequential(f"api.{api}.stream", one(lambda t: t.generate(api, stream=True))),
        sequential(f"api.{api}.models", one(lambda t: t.get("/v1/models", api))),
    ]


def _streamed(obs: Observations, api: str) -> Evidence:
    return obs.exchange(f"api.{api}.stream")


def _stream_problems(obs: Observations, api: str) -> list[str]:
    """What is wrong with the shape of the streamed response (a 200 event stream)."""
    ex = _streamed(obs, api)
    return obs.target.dialect(api).shapes.stream([e for e, _ in ex.events])


def _bad_status(ex: Evidence) -> CheckResult | None:
    if ex.status != 200:
        return failed(f"status {ex.status or ex.error}, expected 200", response=ex.evidence())
    return None


def _shape(problems: list[str], ex: Evidence, ok: str) -> CheckResult:
    if problems:
        return failed(problems[0], problems=problems[:10], response=ex.evidence())
    return passed(ok)


def _unjudged_stream(obs: Observations, api: str) -> CheckResult | None:
    """A skip when the streamed response is a 200 event stream not of the API's shape."""
    ex = _streamed(obs, api)
    if ex.sse_error or _stream_problems(obs, api):
        return skipped(f"the stream is not of the API's shape; see api.{api}.2")
    return None


def response_shape(obs: Observations, api: str) -> CheckResult:
    ex = obs.exchange(f"api.{api}.body")
    if r := _bad_status(ex):
        return r
    shapes = obs.target.dialect(api).shapes
    return _shape(shapes.body(ex.json()), ex, f"a {shapes.noun} body with every required field")


def stream_order(obs: Observations, api: str) -> CheckResult:
    ex = _streamed(obs, api)
    if r := _bad_status(ex):
        return r
    if not ex.is_sse:
        return failed("a streamed request did not get text/event-stream", response=ex.evidence())
    if ex.sse_error:
        return failed(f"the event stream is not valid SSE ({ex.sse_error})", response=ex.evidence())
    return _shape(_stream_problems(obs, api), ex, f"{len(ex.events)} events in order")


def usage_tokens(obs: Observations, api: str) -> CheckResult:
    ex = _streamed(obs, api)
    if ex.status != 200 or not ex.is_sse:
        return skipped(f"no stream to count (status {ex.status}); see api.{api}.2")
    if r := _unjudged_stream(obs, api):
        return r
    tokens, streamed = ex.usage_output_tokens, ex.text_events
    # The stream's own bytes, so that a count can be checked against what was sent.
    evidence = {
        "usage_output_tokens": tokens,
        "text_events": streamed,
        "stream": excerpt(ex.body, STREAM_EXCERPT),
    }
    if tokens is None:
        return failed("the stream reported no output token count", **evidence)
    if obs.target.dialect(api).token_per_event:
        if tokens == streamed:
            return passed(f"{tokens} tokens reported and streamed", **evidence)
        if 0 < streamed < tokens:
            # A server may send two tokens in one chunk (llama.cpp: a token that ends inside
            # a UTF-8 character waits for the next; vLLM when its API process lags).
            return passed(
                f"{tokens} tokens reported in {streamed} chunks: {tokens - streamed} "
                "carried in a chunk with another",
                **evidence,
            )
        return failed(f"usage says {tokens} output tokens, {streamed} were streamed", **evidence)
    # Deltas of any size: each carries at least one token, and text means tokens.
    if streamed > tokens or (tokens > 0) != (streamed > 0):
        return failed(f"usage says {tokens} output tokens for {streamed} text deltas", **evidence)
    return passed(f"{tokens} tokens reported in {streamed} text deltas", **evidence)


def stop_at_max(obs: Observations, api: str) -> CheckResult:
    facts = obs.target.dialect(api)
    seen = []
    for stream in (False, True):
        ex = _streamed(obs, api) if stream else obs.exchange(f"api.{api}.body")
        if r := _bad_status(ex):
            return r
        if stream and (r := _unjudged_stream(obs, api)):
            return r
        one = _stop(facts, ex, stream=stream, limit=obs.target.options.max_tokens)
        seen.append(one)
        if problem := _stop_problem(facts, one):
            return failed(problem, **one)
    return passed(f"{facts.stop_field} right, streamed and not", responses=seen)


def models(obs: Observations, api: str) -> CheckResult:
    ex = obs.exchange(f"api.{api}.models")
    if r := _bad_status(ex):
        return r
    shapes = obs.target.dialect(api).shapes
    return _shape(shapes.models(ex.json()), ex, "a model list of the API's shape")


def _for(
    api: str, check: Callable[[Observations, str], CheckResult]
) -> Callable[[Observations], CheckResult]:
    """`check` of `api`, skipped when --api does not include it."""

    def run(obs: Observations) -> CheckResult:
        if api not in obs.target.options.apis:
            return skipped(f"--api does not include {api}")
        return check(obs, api)

    return run


def api_checks(api: str) -> list[Check]:
    """The api.<api>.* group of the registered dialect `api`, in the words of its facts."""
    dialect = DIALECTS[api]
    noun, stop_field = dialect.shapes.noun, dialect.stop_field
    body, stream = f"api.{api}.body", f"api.{api}.stream"
    statements = [
        (f"A non-streamed request returns a {noun} JSON body of the API's shape.", response_shape),
        ("A streamed response has the API's event order and event shapes.", stream_order),
        (dialect.usage_statement, usage_tokens),
        (f"{stop_field} says the output stopped at max_tokens exactly when it did.", stop_at_max),
        ("GET /v1/models returns a model list of the API's shape.", models),
    ]
    needs = [(body,), (stream,), (stream,), (body, stream), (f"api.{api}.models",)]
    return [
        Check(f"api.{api}.{n}", statement, _for(api, check), need)
        for n, ((statement, check), need) in enumerate(zip(statements, needs, strict=True), 1)
    ]


def _stop(facts: Dialect, ex: Evidence, *, stream: bool, limit: int) -> dict[str, Any]:
    """What one response said about where its output stopped (asked for `limit` tokens)."""
    return {
        "stream": stream,
        "max_tokens": limit,
        "output_tokens": ex.usage_output_tokens,
        facts.stop_field: ex.stop_reason,
    }


def _stop_problem(facts: Dialect, one: dict[str, Any]) -> str | None:
    """Why the stop reason in `one` (from `_stop`) contradicts the output's length."""
    field, at_max = facts.stop_field, facts.stop_at_max_tokens
    tokens, reason, limit = one["output_tokens"], one[field], one["max_tokens"]
    if tokens is None or reason is None:
        return f"no output token count or {field}"
    if tokens > limit:
        return f"{tokens} output tokens exceed max_tokens {limit}"
    if tokens == limit and reason != at_max:
        return f"{field} is {reason!r} at max_tokens, expected {at_max!r}"
    if tokens < limit and reason == at_max:
        return f"{field} is {reason!r} below max_tokens"
    return None
