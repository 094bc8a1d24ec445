"""api.anthropic.* and api.openai.*: does the endpoint speak the API the SDKs expect?

Both groups have the same five checks, built by `api_checks(api)`:
    .1 the non-streamed response's JSON shape      .2 the stream's event order and shapes
    .3 usage output tokens = text events streamed  .4 stop_reason/finish_reason at max_tokens
    .5 GET /v1/models
"""

from __future__ import annotations

from typing import Any

from zqbench.conform.checks import shapes
from zqbench.conform.client import Exchange
from zqbench.conform.context import Context
from zqbench.conform.model import Check, CheckResult, failed, passed, skipped
from zqbench.conform.wire import body_json, event_json, stream_texts

_AT_MAX = {"anthropic": "max_tokens", "openai": "length"}
_REASON = {"anthropic": "stop_reason", "openai": "finish_reason"}


def _not_selected(ctx: Context, api: str) -> CheckResult | None:
    if api not in ctx.options.apis:
        return skipped(f"--api does not include {api}")
    return None


def _streamed(ctx: Context, api: str) -> Exchange:
    return ctx.once(f"api.{api}.stream", lambda: ctx.send(ctx.generate(api, stream=True)))


def _bad_status(ex: Exchange) -> CheckResult | None:
    if ex.status != 200:
        return failed(f"status {ex.status or ex.error}, expected 200", response=ex.evidence())
    return None


def _usage_and_reason(api: str, ex: Exchange) -> tuple[int | None, str | None]:
    """Output tokens from usage and the stop/finish reason, from a body or a stream."""
    objs: list[Any] = [event_json(e) for e, _ in ex.events] if ex.is_sse else [body_json(ex)]
    tokens: int | None = None
    reason: str | None = None
    for obj in objs:
        if not isinstance(obj, dict):
            continue
        usage = obj.get("usage")
        if api == "anthropic":
            delta = obj.get("delta") if obj.get("type") == "message_delta" else obj
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                reason = delta["stop_reason"]
            if obj.get("type") in ("message_delta", "message") and isinstance(usage, dict):
                tokens = usage.get("output_tokens")
        else:
            choices = obj.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else None
            if isinstance(first, dict) and isinstance(first.get("finish_reason"), str):
                reason = first["finish_reason"]
            if isinstance(usage, dict):
                tokens = usage.get("completion_tokens")
    return (tokens if isinstance(tokens, int) else None), reason


def api_checks(api: str) -> list[Check]:
    body_shape = shapes.anthropic_message if api == "anthropic" else shapes.openai_completion
    stream_shape = shapes.anthropic_stream if api == "anthropic" else shapes.openai_stream
    models_shape = shapes.anthropic_models if api == "anthropic" else shapes.openai_models
    noun = "Message" if api == "anthropic" else "chat.completion"

    def response_shape(ctx: Context) -> CheckResult:
        if r := _not_selected(ctx, api):
            return r
        ex = ctx.send(ctx.generate(api, stream=False))
        if r := _bad_status(ex):
            return r
        problems = body_shape(body_json(ex))
        if problems:
            return failed(problems[0], problems=problems[:10], response=ex.evidence())
        return passed(f"a {noun} body with every required field")

    def stream_order(ctx: Context) -> CheckResult:
        if r := _not_selected(ctx, api):
            return r
        ex = _streamed(ctx, api)
        if r := _bad_status(ex):
            return r
        if not ex.is_sse:
            return failed(
                "a streamed request did not get text/event-stream", response=ex.evidence()
            )
        if ex.sse_error:
            return failed(
                f"the event stream is not valid SSE ({ex.sse_error})", response=ex.evidence()
            )
        problems = stream_shape([e for e, _ in ex.events])
        if problems:
            return failed(problems[0], problems=problems[:10], response=ex.evidence())
        return passed(f"{len(ex.events)} events in order")

    def usage_tokens(ctx: Context) -> CheckResult:
        if r := _not_selected(ctx, api):
            return r
        ex = _streamed(ctx, api)
        if ex.status != 200 or not ex.is_sse:
            return skipped(f"no stream to count (status {ex.status}); see api.{api}.2")
        streamed = len(stream_texts(api, ex))
        tokens, _ = _usage_and_reason(api, ex)
        evidence = {"usage_output_tokens": tokens, "text_events": streamed}
        if tokens is None:
            return failed("the stream reported no output token count", **evidence)
        if tokens != streamed:
            return failed(
                f"usage says {tokens} output tokens, {streamed} were streamed", **evidence
            )
        return passed(f"{tokens} tokens reported and streamed", **evidence)

    def stop_at_max(ctx: Context) -> CheckResult:
        if r := _not_selected(ctx, api):
            return r
        limit = ctx.options.max_tokens
        seen = []
        for stream in (False, True):
            ex = _streamed(ctx, api) if stream else ctx.send(ctx.generate(api, stream=False))
            if r := _bad_status(ex):
                return r
            tokens, reason = _usage_and_reason(api, ex)
            one = {
                "stream": stream,
                "max_tokens": limit,
                "output_tokens": tokens,
                _REASON[api]: reason,
            }
            seen.append(one)
            if tokens is None or reason is None:
                return failed(f"no output token count or {_REASON[api]}", **one)
            if tokens > limit:
                return failed(f"{tokens} output tokens exceed max_tokens {limit}", **one)
            if tokens == limit and reason != _AT_MAX[api]:
                return failed(
                    f"{_REASON[api]} is {reason!r} at max_tokens, expected {_AT_MAX[api]!r}", **one
                )
            if tokens < limit and reason == _AT_MAX[api]:
                return failed(f"{_REASON[api]} is {reason!r} below max_tokens", **one)
        return passed(f"{_REASON[api]} right, streamed and not", responses=seen)

    def models(ctx: Context) -> CheckResult:
        if r := _not_selected(ctx, api):
            return r
        ex = ctx.send(ctx.get("/v1/models", api))
        if r := _bad_status(ex):
            return r
        problems = models_shape(body_json(ex))
        if problems:
            return failed(problems[0], problems=problems[:10], response=ex.evidence())
        return passed("a model list of the API's shape")

    prefix = f"api.{api}"
    reason = _REASON[api]
    return [
        Check(
            f"{prefix}.1",
            f"A non-streamed request returns a {noun} JSON body of the API's shape.",
            response_shape,
        ),
        Check(
            f"{prefix}.2",
            "A streamed response has the API's event order and event shapes.",
            stream_order,
        ),
        Check(
            f"{prefix}.3",
            "Usage output tokens equal the number of text events streamed.",
            usage_tokens,
        ),
        Check(
            f"{prefix}.4",
            f"{reason} says the output stopped at max_tokens exactly when it did.",
            stop_at_max,
        ),
        Check(f"{prefix}.5", "GET /v1/models returns a model list of the API's shape.", models),
    ]
