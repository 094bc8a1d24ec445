"""The request-source protocol: what each request asks, whenever it goes.

An executor (`zqbench.load`) decides when a request goes and hands the engine a `Slot`;
the source decides what that request is. A source is two objects:

    RequestSource   the description: frozen, picklable, with a wire form, built once per
                    run (after calibration, so prompts can be sized to the target)
    Requests        its state in one worker: RequestSource.open() in the worker's process

`Requests.answered` hears every response, so a source whose next request depends on the
last answer (a conversation) has what it needs. Sources register by name in
`zqbench.sources.SOURCES`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot


class Requests(Protocol):
    def request(self, slot: Slot) -> RequestSpec:
        """The request to send in `slot`; called once per slot, in the slot's order."""

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        """The response to `request` ended (also when it failed)."""


class RequestSource(Protocol):
    wire_name: ClassVar[str]  # its key in SOURCES

    def open(self) -> Requests:
        """This worker's state (called in the worker's own process)."""

    def prompt_bytes(self) -> dict[str, int]:
        """Bytes of prompt text per request class, for the summary's environment."""

    def describe(self) -> dict[str, Any]:
        """What summary.json records of the source (`environment.request_source`)."""

    def to_wire(self) -> dict[str, Any]: ...
