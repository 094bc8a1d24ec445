"""api.<name>.* for each registered dialect (api.anthropic.*, api.openai.*): does the
endpoint speak the API the SDKs expect?

Every group has the same seven checks, built by `api_checks(api)`:
    .1 the non-streamed response's JSON shape      .2 the stream's event order and shapes
    .3 usage output tokens match the text events   .4 stop_reason/finish_reason at max_tokens
    .5 GET /v1/models                              .6 a named tool's call, streamed
    .7 thinking, streamed, where the target thinks

What a response says (its text events, usage, stop reason) is what the dialect's parser,
the one `zqbench run` measures with, reads from it. .3 and .4 judge a stream only when it
has the API's shape: a stream out of order is .2's failure, not theirs. The shapes, the
stop-reason facts and .3's statement are the dialect's own (`zqbench.dialects`), and so
are the wire formats of a tool call and of thinking that .6 and .7 judge (`ApiShapes`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zqbench.conform.evidence import Evidence, excerpt
from zqbench.conform.model import Check, CheckResult, Phase, failed, passed, sequential, skipped
from zqbench.conform.observations import Observations
from zqbench.dialects import DIALECTS
from zqbench.dialects.base import Dialect, ToolDef, Tools
from zqbench.dialects.shapes import Reading
from zqbench.dialects.sse import SSEEvent
from zqbench.printable import shown

if TYPE_CHECKING:
    from zqbench.conform.context import Target
    from zqbench.conform.evidence import Request
    from zqbench.conform.model import Cases

STREAM_EXCERPT = 16 * 1024  # api.<name>.3, .6, .7 keep this much of the stream they judged

# api.<name>.6: one tool, named in tool_choice, so that a server that calls tools must call
# it. TOOL_MAX_TOKENS leaves room for the call to close: the reference server's fills it
# exactly; vLLM's tiny random model closes within about 100 tokens, or is cut (then only
# what was streamed is judged: inconclusive, not a failure of the format).
LOOKUP = ToolDef(
    "lookup",
    "Look a word up.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
CALL = Tools((LOOKUP,), LOOKUP.name, named=True)
TOOL_MAX_TOKENS = 128
# api.<name>.7: think at most THINKING_BUDGET tokens, then answer. Small, so that a target
# that ignores the request costs little; Anthropic's own API asks at least 1,024 and answers
# 400, which .7 takes as "not asked the way it thinks" (a skip).
THINKING_BUDGET = 16
THINKING_MAX_TOKENS = 32


def phases(api: str) -> list[Phase]:
    """The requests api.<api>.* judge: one non-streamed (.1, .4), one streamed (.2-.4),
    GET /v1/models (.5); none when --api does not include `api`."""

    def one(build: Callable[[Target], Request]) -> Callable[[Target], Cases]:
        return lambda t: [(api, build(t))] if api in t.options.apis else []

    def call(t: Target) -> Request:
        return t.generate(api, stream=True, max_tokens=TOOL_MAX_TOKENS, tools=CALL)

    def think(t: Target) -> Request:
        limit, budget = THINKING_MAX_TOKENS, THINKING_BUDGET
        return t.generate(api, stream=True, max_tokens=limit, thinking_budget=budget)

    return [
        sequential(f"api.{api}.body", one(lambda t: t.generate(api, stream=False))),
        sequential(f"api.{api}.stream", one(lambda t: t.generate(api, stream=True))),
        sequential(f"api.{api}.models", one(lambda t: t.get("/v1/models", api))),
        sequential(f"api.{api}.tool", one(call)),
        sequential(f"api.{api}.thinking", one(think)),
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


def tool_call(obs: Observations, api: str) -> CheckResult:
    ex = obs.exchange(f"api.{api}.tool")
    if r := _not_served(ex, "a named tool's call"):
        # vLLM launched without --tool-call-parser: "tool_choice=function "lookup" requires
        # --tool-call-parser to be set". A server that ignores the tools fails below.
        return r
    facts = obs.target.dialect(api)
    return _wire(
        ex,
        facts,
        lambda events: facts.shapes.tool_call(events, LOOKUP.name),
        lambda seen: (
            f"a call of {LOOKUP.name!r}, its arguments a JSON object ({seen[facts.stop_field]})"
        ),
    )


def thinking(obs: Observations, api: str) -> CheckResult:
    ex = obs.exchange(f"api.{api}.thinking")
    if r := _not_served(ex, "thinking"):
        # Anthropic's API and vLLM's Messages route: a budget under 1,024; OpenAI's: an
        # unknown field. It does not think when asked so, which is no failure of a format.
        return r
    facts = obs.target.dialect(api)
    return _wire(
        ex,
        facts,
        facts.shapes.thinking,
        lambda _: "thinking streamed before the answer, in the API's format",
    )


def _not_served(ex: Evidence, what: str) -> CheckResult | None:
    """A skip when the target refused the request as one it does not serve (400 or 422, in
    its own words): it was not launched or built to answer with `what`."""
    if ex.status not in (400, 422):
        return None
    words = shown(ex.error_words() or excerpt(ex.body), 120)
    why = f"not applicable: the request for {what} got status {ex.status} ({words})"
    return skipped(why, response=ex.evidence())


def _wire(
    ex: Evidence,
    facts: Dialect,
    read: Callable[[list[SSEEvent]], Reading],
    ok: Callable[[dict[str, Any]], str],
) -> CheckResult:
    """A streamed answer judged by the API's stream shape and `read`, the rule of a wire
    format (a tool call's, thinking's): a fail names the first problem, a skip why nothing
    could be judged, a pass says `ok` of what the rule saw."""
    if r := _bad_status(ex):
        return r
    if not ex.is_sse:
        return failed("a streamed request did not get text/event-stream", response=ex.evidence())
    if ex.sse_error:
        return failed(f"the event stream is not valid SSE ({ex.sse_error})", response=ex.evidence())
    events = [e for e, _ in ex.events]
    reading = read(events)
    problems = [*facts.shapes.stream(events), *reading.problems]
    evidence = {**reading.facts, "stream": excerpt(ex.body, STREAM_EXCERPT)}
    if problems:
        return failed(problems[0], problems=problems[:10], **evidence)
    if reading.unjudged is not None:
        return skipped(reading.unjudged, **evidence)
    return passed(ok(reading.facts), **evidence)


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
        (
            "A streamed request that names its one tool in tool_choice gets a call of it in "
            "the API's wire format, its arguments a JSON object.",
            tool_call,
        ),
        (
            "Where the target thinks, a streamed request for thinking gets it in the API's "
            "wire format, before the answer.",
            thinking,
        ),
    ]
    needs = [(body,), (stream,), (stream,), (body, stream), (f"api.{api}.models",)]
    needs += [(f"api.{api}.tool",), (f"api.{api}.thinking",)]
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
