"""The Anthropic Messages dialect: `POST /v1/messages`, streamed as named SSE events.

Stream (as the API documents it and the reference server sends it): `message_start`
(usage.input_tokens), `content_block_start`, `content_block_delta`* (text_delta),
`content_block_stop`, `message_delta` (cumulative usage.output_tokens, stop_reason,
optionally `zq_timing`), `message_stop`; `ping` anywhere; `error` mid-stream; unknown event
types are ignored.

Token events (see `zqbench.dialects.parser`): each `content_block_delta` whose delta is a
`text_delta` with a string `text` is one, empty text included (a token that completes no
character); so is a `thinking_delta` (thinking) and an `input_json_delta` (a tool call's
input) whose piece is not empty. A `signature_delta` is none. A `content_block_start` opens
its block empty, `{"type":"text","text":""}`: that is no token; text there, if a server
sends some, is generated text and counts. Thinking the server does not show is one thinking
token event, so that TTFT still marks the model's start: a `redacted_thinking` block at its
arrival (marked redacted), and a thinking block that streamed no thinking text (display
`omitted`: only its signature comes) at its start (marked omitted). `message_delta`'s
cumulative `usage.output_tokens` is the server's count (thinking included); `message_start`'s
is a placeholder.
"""

from __future__ import annotations

import json
from typing import Any

from zqbench.dialects import anthropic_shapes, common
from zqbench.dialects.base import (
    OMITTED,
    REDACTED,
    TEXT,
    THINKING,
    TOOL,
    DialectConfig,
    Message,
    RequestSpec,
    ToolCall,
)
from zqbench.dialects.parser import DialectBase, ResponseParser
from zqbench.dialects.sse import SSEEvent
from zqbench.redact import Secret
from zqbench.transport.base import HttpRequest

PATH = "/v1/messages"

# Events whose data we read; everything else (ping, content_block_stop, new types) is skipped
# without even parsing its JSON. "message" is an event without an `event:` line: its JSON
# `type` names it instead.
_READ = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
        "error",
        "message",
    }
)


# A delta's type: the field with its piece, and what it carries. Each is one token event;
# thinking and tool-input pieces only when not empty (a block may open with an empty one).
_DELTAS = {
    "text_delta": ("text", TEXT),
    "thinking_delta": ("thinking", THINKING),
    "input_json_delta": ("partial_json", TOOL),
}
_BLOCKS = {"thinking": THINKING, "redacted_thinking": THINKING | REDACTED, "tool_use": TOOL}


class AnthropicParser(ResponseParser):
    __slots__ = ("_hidden_since",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The start of a thinking block that has streamed no thinking text so far
        self._hidden_since: int | None = None

    def _settle_hidden(self) -> None:
        """The thinking block before this event showed no text: its start is a token."""
        if self._hidden_since is not None:
            t_start, self._hidden_since = self._hidden_since, None
            self.summary.carried |= OMITTED
            self._token("", t_start, THINKING)

    def _event(self, event: SSEEvent, t_ns: int, at_eof: bool) -> None:
        name = event.event
        if name not in _READ:
            return
        obj = self._json_object(event.data, at_eof)
        if obj is None:
            return
        if name == "message":
            kind = obj.get("type")
            name = kind if isinstance(kind, str) else ""
        if name == "content_block_delta":
            delta = obj.get("delta")
            if isinstance(delta, dict):
                kind = _DELTAS.get(delta.get("type"))  # type: ignore[arg-type]
                if kind is not None:
                    piece = delta.get(kind[0])
                    if isinstance(piece, str) and (piece or kind[1] == TEXT):
                        if kind[1] == THINKING:
                            self._hidden_since = None
                        self._token(piece, t_ns, kind[1])
                        if kind[1] == TOOL:
                            self._keep_arguments(piece)
                        elif piece:
                            self._pure = (piece, kind[1])  # one token and nothing else
        elif name == "message_start":
            self._began = True
            message = obj.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                self._usage(usage, output=False)
        elif name == "content_block_start":
            # The block normally starts empty; text here, if any, is generated text too.
            self._settle_hidden()
            block = obj.get("content_block")
            if isinstance(block, dict):
                if block.get("type") == "redacted_thinking":
                    self.summary.carried |= REDACTED
                    self._token("", t_ns, THINKING)
                elif block.get("type") == "thinking" and not block.get("thinking"):
                    self._hidden_since = t_ns
                elif block.get("type") == "tool_use":
                    self.summary.tool_calls += 1
                    self._keep_call(block.get("id"), block.get("name"))
                self._text(block, "text", t_ns, empty_counts=False)
        elif name == "message_delta":
            self._settle_hidden()
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._usage(usage, output=True)
            delta = obj.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
            common.apply_zq_timing(self.summary, obj.get("zq_timing"))
        elif name == "message_stop":
            self._settle_hidden()
            common.apply_zq_timing(self.summary, obj.get("zq_timing"))
            self._finish_stream()
        elif name == "error":
            self._server_error(obj.get("error"))

    def _text(self, part: Any, kind: str, t_ns: int, *, empty_counts: bool) -> None:
        """A delta or content block of type `kind` with string text: one token event (an
        empty one only when `empty_counts`)."""
        if isinstance(part, dict) and part.get("type") == kind:
            text = part.get("text")
            if isinstance(text, str) and (text or empty_counts):
                self._token(text, t_ns)

    def _usage(self, usage: dict[str, Any], *, output: bool) -> None:
        s = self.summary
        prompt = common.count(usage.get("input_tokens"))
        if prompt is not None:
            # input_tokens leaves out what the cache supplied or stored: the prompt is all three.
            read = common.count(usage.get("cache_read_input_tokens"))
            created = common.count(usage.get("cache_creation_input_tokens"))
            s.prompt_tokens = prompt + (read or 0) + (created or 0)
            if read is not None:
                s.cached_tokens = read
        if output:  # message_start's output_tokens is a placeholder; message_delta's is cumulative
            out = common.count(usage.get("output_tokens"))
            if out is not None:
                s.output_tokens = out
                s.tokens_from_usage = True

    def _body_json(self, obj: dict[str, Any], t_ns: int) -> None:
        if obj.get("type") == "error" or obj.get("error"):
            self._server_error(obj.get("error"))
            return
        content = obj.get("content")
        if not isinstance(content, list):
            self._fail("bad_json")
            return
        texts = []
        carried = 0
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind in _BLOCKS:
                carried |= _BLOCKS[kind]
                if kind == "thinking" and not block.get("thinking"):
                    carried |= OMITTED
                if kind == "tool_use":
                    self.summary.tool_calls += 1
                    self._keep_call(
                        block.get("id"), block.get("name"), json.dumps(block.get("input"))
                    )
        self._body_text(*texts, carried=carried)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage, output=True)
        if isinstance(obj.get("stop_reason"), str):
            self.stop_reason = obj["stop_reason"]


class AnthropicDialect(DialectBase):
    name = "anthropic"
    path = PATH
    required_fields: tuple[str, ...] = ("model", "messages", "max_tokens")
    stop_field = "stop_reason"
    stop_at_max_tokens = "max_tokens"
    count_tokens_path: str | None = "/v1/messages/count_tokens"
    shapes = anthropic_shapes.SHAPES
    usage_statement = (
        "Usage output tokens account for the text deltas streamed (at least one each)."
    )
    parser_class = AnthropicParser
    exact_output_statement = "not forced: the Messages API has no minimum output length"

    def _prepare(self, config: DialectConfig) -> None:
        self._heads: dict[int, bytes] = {}  # max_tokens -> the body up to the prompt

    def _headers(self, config: DialectConfig) -> list[tuple[str, str]]:
        headers = [
            ("content-type", "application/json"),
            ("anthropic-version", config.anthropic_version),
        ]
        if config.api_key:
            headers.append(("x-api-key", Secret(config.api_key)))
        return headers

    def build(self, spec: RequestSpec) -> HttpRequest:
        if not spec.plain:
            return HttpRequest("POST", PATH, self.headers, self._full_body(spec))
        # Every prompt differs (the engine makes them unique), so only the JSON around it is
        # cached: the body is head + the encoded prompt + a fixed tail.
        head = self._heads.get(spec.max_tokens)
        if head is None:
            head = b'{"model":%s,"max_tokens":%d,"messages":[{"role":"user","content":' % (
                self._model_json,
                int(spec.max_tokens),
            )
            if len(self._heads) < 64:
                self._heads[spec.max_tokens] = head
        tail = b'}],"stream":true}' if spec.stream else b'}],"stream":false}'
        body = head + json.dumps(spec.prompt).encode("ascii") + tail
        return HttpRequest("POST", PATH, self.headers, body)

    def _full_body(self, spec: RequestSpec) -> bytes:
        """A system prompt, earlier turns, tools or thinking: the whole body as JSON (the API
        has no way to ask for an exact output length, so `exact_output` changes nothing)."""
        messages = [_message(m) for m in spec.history]
        messages.append(_message(Message("user", spec.prompt, spec.results_for)))
        body: dict[str, Any] = {"model": self.config.model, "max_tokens": int(spec.max_tokens)}
        if spec.system:
            body["system"] = spec.system
        body["messages"] = messages
        if spec.tools is not None:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in spec.tools.offered
            ]
            choice = spec.tools.choice
            body["tool_choice"] = (
                {"type": "tool", "name": choice} if spec.tools.named else {"type": choice}
            )
        if spec.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": int(spec.thinking_budget)}
        body["stream"] = spec.stream
        return json.dumps(body, separators=(",", ":")).encode("ascii")

    def error_problem(self, obj: Any) -> str | None:
        problem = super().error_problem(obj)
        if problem is None and obj.get("type") != "error":
            return 'top-level "type" is not "error"'
        return problem


def _message(m: Message) -> dict[str, Any]:
    """A message in the Messages API's words: a tool result is a user message of
    `tool_result` blocks, a call an assistant's `tool_use` block (after its text, if any)."""
    if not m.calls:
        return {"role": m.role, "content": m.text}
    if m.role == "user":
        results = [{"type": "tool_result", "tool_use_id": c.id, "content": m.text} for c in m.calls]
        return {"role": "user", "content": results}
    content: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
    for c in m.calls:
        content.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)})
    return {"role": "assistant", "content": content}


def _input(call: ToolCall) -> Any:
    """A call's arguments as the object `tool_use.input` must be: arguments that are not a
    JSON object (a model's broken call, or arguments cut where they were kept) are sent as
    `{}`, so the conversation goes on and the server still sees a call to answer."""
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
