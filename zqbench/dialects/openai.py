"""The OpenAI chat-completions dialect: `POST /v1/chat/completions`, `data:`-only SSE.

Stream (as the API documents it and the reference server sends it): chunks
`{"choices":[{"delta":{"content"}}]}`, with `stream_options.include_usage` one more chunk
with `"choices": []` and `usage`, then `data: [DONE]`. A chunk with a truthy `error` key (or
vLLM's flat `"object": "error"`) is an error. `zq_timing` may ride at the top level of the
final chunk or of the body.

Token events (see `zqbench.dialects.parser`). A chunk is a token when `choices[0].delta`
has a string `content`, empty or not, except:

- the role announcement: `content` is "" and the delta also has `role`. OpenAI and vLLM
  open every stream with `{"delta":{"role":"assistant","content":""}}`, before any token;
- a chunk with empty `content` and `finish_reason` set is provisional. vLLM puts the last
  generated token on the chunk that carries finish_reason, and a last token without text
  (the end-of-sequence token, half a character) leaves `content` ""; other servers send
  such a chunk as a trailer after the last token. It counts unless the usage chunk's
  `completion_tokens` is already matched by the other token events (without usage it
  counts: one chunk, one token).

Reasoning and tool calls: a delta with a non-empty `reasoning` (vLLM 0.32) or
`reasoning_content` (SGLang, DeepSeek) is a thinking token event; one whose `tool_calls`
carry a non-empty `function.arguments` piece is a tool-call token event (the piece that only
names the function is none). usage's `completion_tokens_details.reasoning_tokens` is the
server's count of thinking tokens.

Not tokens: a delta without `content` or with `content: null` otherwise (OpenAI's own final
chunk is `{"delta":{},"finish_reason":"stop"}`), the usage chunk (`"choices": []`),
`[DONE]`. A stream's TTFT is therefore its first token, thinking included, never the role
chunk.
"""

from __future__ import annotations

import json
from typing import Any

from zqbench.dialects import common, openai_shapes
from zqbench.dialects.base import TEXT, THINKING, TOOL, DialectConfig, Message, RequestSpec
from zqbench.dialects.parser import DialectBase, ResponseParser
from zqbench.dialects.sse import SSEEvent
from zqbench.redact import Secret
from zqbench.transport.base import HttpRequest

PATH = "/v1/chat/completions"


def _error_of(obj: dict[str, Any]) -> Any:
    """The error a chunk or body carries, or None."""
    err = obj.get("error")
    if err:
        return err
    if obj.get("object") == "error":  # vLLM's older flat shape
        return obj
    return None


class OpenAIParser(ResponseParser):
    __slots__ = ()

    def _event(self, event: SSEEvent, t_ns: int, at_eof: bool) -> None:
        data = event.data
        if data.startswith("[DONE]"):  # the SDK's own test
            self._finish_stream()
            return
        if event.event != "message" and event.event != "error":
            return  # another named event is not a chat chunk (servers may add their own)
        obj = self._json_object(data, at_eof)
        if obj is None:
            return
        self._began = True  # any chunk opens the stream
        err = _error_of(obj)
        if err is None and event.event == "error":
            err = obj  # `event: error`, as some OpenAI-compatible servers send
        if err is not None:
            self._server_error(err)
            return
        choices = obj.get("choices")
        text = None  # the text of a chunk that is one text token and nothing else
        if choices and isinstance(choices, list):
            choice = choices[0]
            if isinstance(choice, dict):
                reason = choice.get("finish_reason")
                if not isinstance(reason, str):
                    reason = None
                delta = choice.get("delta")
                self._delta(delta, reason is not None, t_ns)
                if reason is not None:
                    self.stop_reason = reason
                elif isinstance(delta, dict):
                    text = delta.get("content")
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
            text = None
        timing = obj.get("zq_timing")
        if timing is not None:
            common.apply_zq_timing(self.summary, timing)
        elif text and isinstance(text, str):
            self._pure = (text, TEXT)  # `_delta` made it a token and nothing else

    def _delta(self, delta: Any, finishing: bool, t_ns: int) -> None:
        """A chunk's delta as a token event, by the rule in the module docstring."""
        if not isinstance(delta, dict):
            return
        text = delta.get("content")
        if text and isinstance(text, str):
            self._token(text, t_ns)
        elif self._other_delta(delta, t_ns) or not isinstance(text, str):
            return
        elif "role" in delta:
            return  # the role announcement
        elif finishing:
            self._provisional_token(t_ns)
        else:
            self._token(text, t_ns)

    def _other_delta(self, delta: dict[str, Any], t_ns: int) -> bool:
        """Whether the delta was reasoning (`reasoning`, vLLM 0.32; `reasoning_content`,
        SGLang and DeepSeek) or tool calls; a non-empty piece of either is a token event of
        its kind (one a delta), never an empty `content` beside it."""
        thought = delta.get("reasoning")
        if thought is None:
            thought = delta.get("reasoning_content")
        if isinstance(thought, str):
            if thought:
                self._token(thought, t_ns, THINKING)
            return True
        calls = delta.get("tool_calls")
        if not isinstance(calls, list):
            return False
        token = False
        for call in calls:
            if not isinstance(call, dict):
                continue
            fn = call.get("function")
            if not isinstance(fn, dict):
                fn = {}
            if call.get("id"):  # a call's first piece carries its id
                self.summary.tool_calls += 1
                self._keep_call(call["id"], fn.get("name"))
            args = fn.get("arguments")
            if isinstance(args, str) and args:
                if not token:
                    self._token(args, t_ns, TOOL)
                    token = True
                index = call.get("index")
                self._keep_arguments(args, index if type(index) is int else -1)
        return True

    def _usage(self, usage: dict[str, Any]) -> None:
        s = self.summary
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict):
            reasoning = common.count(details.get("reasoning_tokens"))
            if reasoning is not None:
                s.reasoning_tokens = reasoning
        prompt = common.count(usage.get("prompt_tokens"))
        if prompt is not None:
            s.prompt_tokens = prompt
        details = usage.get("prompt_tokens_details")  # vLLM: --enable-prompt-tokens-details
        if isinstance(details, dict):
            cached = common.count(details.get("cached_tokens"))
            if cached is not None:
                s.cached_tokens = cached
        out = common.count(usage.get("completion_tokens"))
        if out is not None:
            s.output_tokens = out
            s.tokens_from_usage = True

    def _body_json(self, obj: dict[str, Any], t_ns: int) -> None:
        err = _error_of(obj)
        if err is not None:
            self._server_error(err)
            return
        choices = obj.get("choices")
        if not isinstance(choices, list):
            self._fail("bad_json")
            return
        text = ""
        carried = 0
        if choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict):
                if isinstance(message.get("content"), str):
                    text = message["content"]
                if message.get("reasoning") or message.get("reasoning_content"):
                    carried |= THINKING
                calls = message.get("tool_calls")
                if isinstance(calls, list) and calls:
                    carried |= TOOL
                    self.summary.tool_calls = len(calls)
                    for call in calls:
                        fn = call.get("function") if isinstance(call, dict) else None
                        if isinstance(fn, dict):
                            self._keep_call(call.get("id"), fn.get("name"), fn.get("arguments"))
            if isinstance(choices[0].get("finish_reason"), str):
                self.stop_reason = choices[0]["finish_reason"]
        self._body_text(text, carried=carried)
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)


class OpenAIDialect(DialectBase):
    name = "openai"
    path = PATH
    required_fields: tuple[str, ...] = ("model", "messages")
    stop_field = "finish_reason"
    stop_at_max_tokens = "length"
    token_per_event = True
    shapes = openai_shapes.SHAPES
    usage_statement = (
        "Usage output tokens equal the content chunks streamed, one per token, or exceed "
        "them where a chunk carried several; never fewer tokens than chunks."
    )
    parser_class = OpenAIParser
    # vLLM's and SGLang's sampling extensions; a server without them ignores or refuses them.
    exact_output_statement = None

    def _prepare(self, config: DialectConfig) -> None:
        self._head = b'{"model":%s,"messages":[{"role":"user","content":' % self._model_json
        if config.include_usage:
            self._stream_tail = b',"stream":true,"stream_options":{"include_usage":true}}'
        else:
            self._stream_tail = b',"stream":true}'

    def _headers(self, config: DialectConfig) -> list[tuple[str, str]]:
        headers = [("content-type", "application/json")]
        if config.api_key:
            headers.append(("authorization", Secret(f"Bearer {config.api_key}")))
        return headers

    def build(self, spec: RequestSpec) -> HttpRequest:
        if not spec.plain:
            return HttpRequest("POST", PATH, self.headers, self._full_body(spec))
        # Prompts are unique per request; the JSON around the prompt is fixed bytes.
        body = b"".join(
            (
                self._head,
                json.dumps(spec.prompt).encode("ascii"),
                b'}],"max_tokens":%d' % int(spec.max_tokens),
                self._stream_tail if spec.stream else b',"stream":false}',
            )
        )
        return HttpRequest("POST", PATH, self.headers, body)

    def _full_body(self, spec: RequestSpec) -> bytes:
        """A system prompt, earlier turns, an exact length, tools or thinking: the whole body
        as JSON. Thinking is the Messages API's object: the reference server honours it;
        vLLM and SGLang ignore it (their reasoning parser decides), OpenAI refuses it."""
        messages = [{"role": "system", "content": spec.system}] if spec.system else []
        for m in (*spec.history, Message("user", spec.prompt, spec.results_for)):
            messages += _messages(m)
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": int(spec.max_tokens),
        }
        if spec.exact_output:
            body["min_tokens"] = int(spec.max_tokens)
            body["ignore_eos"] = True
        if spec.tools is not None:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in spec.tools.offered
            ]
            choice = spec.tools.choice
            if spec.tools.named:
                body["tool_choice"] = {"type": "function", "function": {"name": choice}}
            else:
                body["tool_choice"] = "required" if choice == "any" else choice
        if spec.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": int(spec.thinking_budget)}
        body["stream"] = spec.stream
        if spec.stream and self.config.include_usage:
            body["stream_options"] = {"include_usage": True}
        return json.dumps(body, separators=(",", ":")).encode("ascii")


def _messages(m: Message) -> list[dict[str, Any]]:
    """A message in chat-completions words: a tool result is one `tool` message a call, a
    call an assistant's `tool_calls` entry (its content null when it wrote no text)."""
    if not m.calls:
        return [{"role": m.role, "content": m.text}]
    if m.role == "user":
        return [{"role": "tool", "tool_call_id": c.id, "content": m.text} for c in m.calls]
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in m.calls
    ]
    return [{"role": "assistant", "content": m.text or None, "tool_calls": calls}]
