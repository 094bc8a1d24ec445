"""What every request offers besides its prompt: tools, and a thinking budget.

`[request] tools`, `tool_choice` and `thinking_budget` apply to whatever source makes the
prompts (synthetic, dataset, shared prefixes, a trace), so they wrap it instead of each
source carrying them: the inner source decides the prompt, this adds the offer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from zqbench.dialects.base import RequestSpec, ResponseSummary, ToolDef, Tools
from zqbench.load import Slot
from zqbench.sources.base import Requests, RequestSource


@dataclass(frozen=True, slots=True)
class OfferSource:
    wire_name: ClassVar[str] = "offer"

    inner: RequestSource
    tools: Tools | None
    thinking_budget: int | None

    def open(self) -> OfferRequests:
        return OfferRequests(self, self.inner.open())

    def prompt_bytes(self) -> dict[str, int]:
        return self.inner.prompt_bytes()

    def describe(self) -> dict[str, Any]:
        described = dict(self.inner.describe())
        if self.tools is not None:
            described["tools"] = [t.name for t in self.tools.offered]
            described["tool_choice"] = self.tools.choice
        if self.thinking_budget is not None:
            described["thinking_budget"] = self.thinking_budget
        return described

    def to_wire(self) -> dict[str, Any]:
        from zqbench.sources import source_to_wire

        tools = None if self.tools is None else dataclasses.asdict(self.tools)
        return {"inner": source_to_wire(self.inner), "tools": tools, "budget": self.thinking_budget}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> OfferSource:
        from zqbench.sources import source_from_wire

        tools = data["tools"]
        if tools is not None:
            offered = tuple(ToolDef(**t) for t in tools["offered"])
            tools = Tools(offered, tools["choice"], tools["named"])
        return cls(source_from_wire(data["inner"]), tools, data["budget"])


class OfferRequests:
    def __init__(self, source: OfferSource, inner: Requests) -> None:
        self.source, self.inner = source, inner

    def request(self, slot: Slot) -> RequestSpec:
        s = self.source
        spec = self.inner.request(slot)
        tools = s.tools if spec.tools is None else spec.tools  # a dataset row's own win
        return dataclasses.replace(spec, tools=tools, thinking_budget=s.thinking_budget)

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        self.inner.answered(slot, request, response)
