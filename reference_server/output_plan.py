"""What a request's output holds, read from either API: thinking tokens first, then a tool
call or text.

The reference model has no judgement, so the plan is explicit and exact, which is what a
measuring tool needs from its ground truth:
- thinking: the first `thinking_tokens` generated tokens are thinking (Anthropic's
  `thinking: {type: enabled, budget_tokens: N}` asks for N; the OpenAI route takes the same
  object, or `reasoning_effort` as a share of max_tokens). `--thinking-tokens N` makes every
  request think N tokens unless it says `thinking: {type: disabled}`: a reasoning model.
  `thinking.display: "omitted"` (the Messages API's; `--thinking-display omitted` makes it the
  default, as on its newest models) thinks as much but streams the thinking block with only
  its signature, no thinking text.
- tools: when the request offers tools and lets or makes the model call one, it calls the named
  tool (or the first): its arguments are `{"<key>": "<generated>"}` for the first string
  property of the tool's schema (`{}` when it has none), the value filling the tokens left to
  max_tokens. Every character of the arguments is one output token, the framing included, as
  structured decoding generates it; the call ends at max_tokens with stop reason tool_use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reference_server.errors import ApiError

# reasoning_effort's share of max_tokens spent thinking.
EFFORT_SHARE = {"none": 0.0, "minimal": 0.0, "low": 0.25, "medium": 0.5, "high": 0.75}


def bad(message: str) -> ApiError:
    return ApiError("invalid_request", message)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The one call a request's answer makes."""

    name: str
    key: str | None  # the string argument generated; None: the arguments are {}

    @property
    def prefix(self) -> str:
        return "{" if self.key is None else "{" + json.dumps(self.key) + ': "'

    @property
    def suffix(self) -> str:
        return "}" if self.key is None else '"}'

    def token_at(self, j: int, room: int, sampled: int) -> int:
        """The arguments' j-th token (0-based) when `room` tokens are left for them:
        the framing is forced, the value is the model's token with JSON's two special
        characters swapped for harmless ones."""
        prefix, suffix = self.prefix, self.suffix
        value = 0 if self.key is None else max(0, room - len(prefix) - len(suffix))
        if j < len(prefix):
            return ord(prefix[j])
        if j < len(prefix) + value:
            return {ord('"'): ord("'"), ord("\\"): ord("/")}.get(sampled, sampled)
        return ord(suffix[j - len(prefix) - value])

    def length(self, room: int) -> int:
        """How many tokens the whole arguments text takes with `room` tokens left."""
        if self.key is None:
            return len(self.prefix) + len(self.suffix)
        return max(room, len(self.prefix) + len(self.suffix))


@dataclass(frozen=True, slots=True)
class OutputPlan:
    thinking_tokens: int | None  # None: the server's --thinking-tokens
    tool: ToolCall | None
    thinking_shown: bool | None = None  # thinking.display; None: the server's --thinking-display

    def thinking(self, default: int, max_tokens: int) -> int:
        """Thinking tokens this request generates first: the server's default runs out
        with max_tokens, as a reasoning model's thinking does."""
        n = default if self.thinking_tokens is None else self.thinking_tokens
        return min(n, max_tokens)


NO_PLAN = OutputPlan(None, None)


def anthropic_plan(data: dict[str, Any], max_tokens: int) -> OutputPlan:
    """`thinking`, `tools` and `tool_choice` of a Messages request."""
    thinking = _thinking(data.get("thinking"), max_tokens)
    tools = _tools(data.get("tools"), _anthropic_tool)
    choice = data.get("tool_choice")
    if choice is None:
        kind, name = ("auto" if tools else "none"), None
    elif not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise bad("tool_choice: must be an object whose type is auto, any, tool or none")
    else:
        kind, name = choice["type"], choice.get("name")
    if kind in ("any", "tool") and thinking:
        raise bad("thinking may not be enabled when tool_choice forces tool use")
    return OutputPlan(thinking, _chosen(tools, kind, name), _shown(data.get("thinking")))


def openai_plan(data: dict[str, Any], max_tokens: int) -> OutputPlan:
    """`reasoning_effort` (or the Anthropic `thinking` object), `tools` and `tool_choice`
    of a chat-completions request."""
    thinking = _thinking(data.get("thinking"), max_tokens)
    effort = data.get("reasoning_effort")
    if effort is not None:
        if effort not in EFFORT_SHARE:
            raise bad(f"reasoning_effort: must be one of {', '.join(EFFORT_SHARE)}")
        thinking = int(max_tokens * EFFORT_SHARE[effort])
    tools = _tools(data.get("tools"), _openai_tool)
    choice = data.get("tool_choice")
    name = None
    if choice is None:
        kind = "auto" if tools else "none"
    elif choice in ("auto", "none", "required"):
        kind = "any" if choice == "required" else choice
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        kind, name = "tool", choice["function"].get("name")
    else:
        raise bad('tool_choice: must be "auto", "none", "required" or {"type": "function", ...}')
    return OutputPlan(thinking, _chosen(tools, kind, name))


def _thinking(value: Any, max_tokens: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("enabled", "disabled"):
        raise bad("thinking: must be an object whose type is enabled or disabled")
    if value["type"] == "disabled":
        return 0
    budget = value.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise bad("thinking.budget_tokens: must be an integer >= 1")
    if budget >= max_tokens:
        raise bad(f"max_tokens ({max_tokens}) must be greater than thinking.budget_tokens")
    return budget


def _shown(value: Any) -> bool | None:
    """Whether the thinking is streamed (`display`: summarized) or omitted; None when the
    request does not say."""
    display = value.get("display") if isinstance(value, dict) else None
    if display is None:
        return None
    if display not in ("summarized", "omitted"):
        raise bad('thinking.display: must be "summarized" or "omitted"')
    return display == "summarized"


def _anthropic_tool(tool: dict[str, Any], where: str) -> tuple[Any, Any]:
    return tool.get("name"), tool.get("input_schema")


def _openai_tool(tool: dict[str, Any], where: str) -> tuple[Any, Any]:
    fn = tool.get("function")
    if tool.get("type") != "function" or not isinstance(fn, dict):
        raise bad(f'{where}: must be {{"type": "function", "function": {{...}}}}')
    return fn.get("name"), fn.get("parameters")


def _tools(value: Any, read: Any) -> list[ToolCall]:
    """Each offered tool as the call the model would make to it."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > 128:
        raise bad("tools: must be a list of at most 128 tools")
    calls = []
    for i, tool in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise bad(f"{where}: must be an object")
        name, schema = read(tool, where)
        if not isinstance(name, str) or not name:
            raise bad(f"{where}: a tool needs a name")
        calls.append(ToolCall(name, _string_key(schema)))
    return calls


def _string_key(schema: Any) -> str | None:
    """The first string property of a JSON schema, required ones first."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    props = schema["properties"]
    required = [k for k in schema.get("required") or [] if isinstance(k, str)]
    for key in [*required, *props]:
        if isinstance(props.get(key), dict) and props[key].get("type") == "string":
            return str(key)
    return None


def _chosen(tools: list[ToolCall], kind: str, name: Any) -> ToolCall | None:
    if kind == "none" or (not tools and kind == "auto"):
        return None
    if not tools:
        raise bad("tool_choice: names a tool, but the request offers no tools")
    if kind != "tool":
        return tools[0]
    for tool in tools:
        if tool.name == name:
            return tool
    raise bad(f"tool_choice: no tool named {name!r} among the tools offered")
