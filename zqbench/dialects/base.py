"""The dialect interface: request building and incremental response parsing.

A dialect turns a `RequestSpec` into an `HttpRequest`, and gives the transport a
fresh `StreamParser` (a `ResponseSink`) per request. The parser never raises: a
malformed stream becomes an error class on the sample (`bad_sse`, `bad_json`,
`stream_error`, `http_<code>`, ...), and the run goes on.

A dialect also names the facts of its API that other code judges responses by (the route,
the required request fields, the stop-reason field and the value it takes at max_tokens,
the error object's shape, the response shapes its SDKs rely on), so no caller branches on
the API's name.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from zqbench.dialects.itl import summarize_gaps, summarize_itl
from zqbench.dialects.shapes import ApiShapes
from zqbench.dialects.sse import SSEEvent
from zqbench.transport.base import HttpRequest, ResponseSink

# Called with each SSE event of a streamed 2xx response and its arrival time, before the
# parser reads it, and also after the parser has stopped reading (conformance judges them all).
EventHook = Callable[[SSEEvent, int], None]


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool a request offers, in neither API's words: each dialect writes its own."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # the JSON Schema of its input


@dataclass(frozen=True, slots=True)
class Tools:
    """The tools a request offers, and whether the model may, must or must not call one."""

    offered: tuple[ToolDef, ...]
    choice: str = "auto"  # auto, any (a call of any tool, OpenAI's "required"), none, or a name
    named: bool = False  # `choice` names the one tool to call


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made, kept so that a conversation's next turn can send it back
    with its result."""

    id: str
    name: str
    arguments: str  # the arguments' JSON text as the model wrote it (maybe not JSON at all)


@dataclass(frozen=True, slots=True)
class Message:
    """An earlier message of a conversation, in neither API's words. An assistant's `calls`
    are the tool calls it made (beside its text, which may be empty); a user's `calls` are
    the calls its text is the result of (a tool result: Anthropic's `tool_result` blocks,
    OpenAI's `tool` messages), one result each."""

    role: str  # "user" or "assistant"
    text: str
    calls: tuple[ToolCall, ...] = ()


@dataclass
class CallPieces:
    """A tool call as a stream delivers it: its id and name first, its arguments in pieces."""

    id: str
    name: str
    pieces: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RequestSpec:
    """What to ask for; the dialect decides how it looks on the wire. Built once a request
    and never changed after (not frozen: a frozen dataclass's __init__ sets each of its 14
    fields through object.__setattr__, 2.5 us a request against 0.7, #45)."""

    request_class: str
    prompt: str  # the user message the request ends with
    max_tokens: int
    stream: bool = True
    prompt_tokens_estimate: int | None = None
    system: str | None = None
    history: tuple[Message, ...] = ()  # the conversation's messages before the prompt
    # The calls `prompt` is the result of (the last message of `history` made them): the
    # prompt is sent as their tool results instead of a user's text
    results_for: tuple[ToolCall, ...] = ()
    exact_output: bool = False  # ask for exactly max_tokens, where the API has a way
    source_row: int | None = None  # the request source's row it came from (a dataset's)
    keep_answer: bool = False  # keep the answer's text (a conversation's next turn needs it)
    headers: tuple[tuple[str, str], ...] = ()  # sent besides the dialect's (a class's own)
    tools: Tools | None = None  # tools offered to the model (a tool-calling workload)
    # Ask the model to think first, with this many tokens at most (< max_tokens): the
    # Messages API's `thinking` object, sent to either API (servers without it ignore it)
    thinking_budget: int | None = None

    @property
    def plain(self) -> bool:
        """One user message and nothing else: the dialects' fast path."""
        return (
            self.system is None
            and not self.history
            and not self.results_for
            and not self.exact_output
            and not self.tools
            and self.thinking_budget is None
        )


@dataclass(frozen=True, slots=True)
class DialectConfig:
    model: str
    api_key: str | None = None  # read from the environment by the caller; never logged
    extra_headers: tuple[tuple[str, str], ...] = ()
    anthropic_version: str = "2023-06-01"
    include_usage: bool = True  # OpenAI stream_options.include_usage

    def __repr__(self) -> str:  # keep the key out of every repr, log and traceback
        key = "<redacted>" if self.api_key else None
        n_headers = len(self.extra_headers)
        return f"DialectConfig(model={self.model!r}, api_key={key}, extra_headers=<{n_headers}>)"


# What a response's token events carried (`ResponseSummary.carried`, bits): reasoning models
# think before they answer, and an answer may be a tool call instead of text.
THINKING, TEXT, TOOL = 1, 2, 4
REDACTED = 8  # the server said its thinking was redacted (Anthropic's redacted_thinking block)
# A thinking block that streamed no thinking text: the Messages API's `display: "omitted"`,
# the default of its newest models (the signature carries the thinking, encrypted)
OMITTED = 16


@dataclass(slots=True)
class ResponseSummary:
    """What one response meant, as the parser understood it."""

    status: int = 0
    t_headers: int | None = None
    t_first_token: int | None = None  # the first token event of any kind, thinking included
    t_first_answer: int | None = None  # the first text or tool-call token event
    carried: int = 0  # THINKING | TEXT | TOOL | REDACTED | OMITTED: what the token events carried
    reasoning_events: int = 0  # token events of thinking (of `token_events`)
    tool_events: int = 0  # token events of a tool call's arguments (of `token_events`)
    tool_calls: int = 0  # the tool calls the answer made
    reasoning_tokens: int | None = None  # the server's count, where its usage gives one
    token_times: list[int] = field(default_factory=list)  # arrival of each token event
    # The gaps between consecutive token events, kept as they come (`add_token`), so that a
    # response of 100,000 events is summarised at its end without a pass in Python.
    token_gaps: array[int] = field(default_factory=lambda: array("q"), compare=False, repr=False)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    tokens_from_usage: bool = False
    cached_tokens: int | None = None  # prompt tokens the server's prefix cache supplied
    error: str | None = None  # None when the response was complete and well formed
    srv_received: float | None = None
    srv_dispatch: float | None = None
    srv_start: float | None = None
    srv_gpu_ms: float | None = None
    retry_after_s: float | None = None
    text_chars: int = 0  # characters of generated text (for the client-side token estimate)
    # The generated text's pieces, kept when the request asked (`RequestSpec.keep_answer`);
    # None otherwise, or when a piece was too large to keep (skimmed, never held).
    answer: list[str] | None = field(default=None, compare=False, repr=False)
    # The tool calls the answer made, kept with `answer` (None when it is not kept)
    calls: list[CallPieces] | None = field(default=None, compare=False, repr=False)

    @property
    def token_events(self) -> int:
        """Token events seen (see `zqbench.dialects.parser`): one per token where the server
        streams one chunk per token, fewer where it packs several; `output_tokens` is the
        server's count when it reported usage."""
        return len(self.token_times)

    @property
    def t_last_token(self) -> int | None:
        """Arrival of the last token event; None when there was none."""
        return self.token_times[-1] if self.token_times else None

    def thinking_tokens(self) -> tuple[int | None, bool]:
        """(thinking tokens, whether the server's usage gave them): usage's count, else the
        thinking token events where the thinking was shown (hidden thinking is one event of
        any length: no count). Usage below the pieces streamed is wrong, each piece being a
        token at least (vLLM's deepseek_r1 parser says 0 when the template opened the
        thinking): the pieces are counted instead."""
        usage = self.reasoning_tokens
        if usage is not None and usage >= self.reasoning_events:
            return usage, True
        if self.carried & (REDACTED | OMITTED):
            return None, False
        return self.reasoning_events or None, False

    def add_token(self, t_ns: int) -> None:
        """One more token event, arrived at `t_ns` (not before the last one)."""
        times = self.token_times
        if times:
            self.token_gaps.append(t_ns - times[-1])
        times.append(t_ns)

    def itl(self) -> tuple[int | None, int | None, int | None]:
        """(mean, p99, max) of the gaps between token events, in ns (`summarize_gaps`)."""
        if len(self.token_gaps) != len(self.token_times) - 1:  # filled without add_token
            return summarize_itl(self.token_times)
        return summarize_gaps(self.token_gaps)


class StreamParser(ResponseSink, Protocol):
    summary: ResponseSummary
    stop_reason: str | None  # why the output stopped, in the API's words, when it said

    @property
    def sse_error(self) -> str | None:
        """`bad_sse` once the event stream was not valid SSE, else None."""
        ...


class Dialect(Protocol):
    name: str  # its key in the registry, zqbench.dialects.DIALECTS: the `--api` value
    path: str  # the generation route, e.g. "/v1/messages"
    headers: tuple[tuple[str, str], ...]  # sent with every request (the key as a Secret)
    required_fields: tuple[str, ...]  # of a generation request's JSON body
    stop_field: str  # the field saying why the output stopped: stop_reason / finish_reason
    stop_at_max_tokens: str  # its value when the output reached max_tokens
    count_tokens_path: str | None  # a route that counts a prompt's tokens, if the API has one
    # One content event per generated token: what OpenAI-compatible servers (vLLM, SGLang,
    # OpenAI) stream. The Messages API promises text deltas of any size: Anthropic's own
    # API sends several tokens per delta, vLLM's adapter merges a character's split bytes.
    token_per_event: bool
    shapes: ApiShapes  # what a well-formed response looks like (the conformance suite's rules)
    usage_statement: str  # conform's api.<name>.3: how usage relates to the text events
    # Whether `RequestSpec.exact_output` reaches the server (else why not, for the report).
    exact_output_statement: str | None

    def build(self, spec: RequestSpec) -> HttpRequest: ...

    def parser(self, spec: RequestSpec, *, on_event: EventHook | None = None) -> StreamParser: ...

    def error_problem(self, obj: Any) -> str | None:
        """Why `obj`, a non-2xx body's JSON, is not this API's error object; None if it is."""
        ...
