"""A conversation's turns (`[load] executor = "sessions"`): each sends the whole conversation.

Turn 0 of a session is one user message: its class's synthetic prompt (the scenario's mix,
the class drawn per session from the run's seed), tagged with the session and turn so no
two messages share a prefix. Turn k sends the earlier turns' user messages and the
server's own answers to them, then a new user message of the same class. The answers are
the text the server streamed (`RequestSpec.keep_answer`), so the server's prefix cache and
its context grow as they would with a real client.

A turn that failed (or answered nothing) is left out of the conversation, as a user would
ask again in other words: the next turn goes on from the last answered one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.errors import ScenarioError
from zqbench.load import SessionsLoad, Slot
from zqbench.scenario import MAX_PROMPT_TOKENS, Scenario
from zqbench.sources.mix import SlotClasses
from zqbench.sources.synthetic import SyntheticSource
from zqbench.sources.synthetic import fit as fit_messages

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration


@dataclass(frozen=True, slots=True)
class SessionsSource:
    wire_name: ClassVar[str] = "sessions"

    messages: SyntheticSource  # each turn's user message: the mix's classes
    turns: int

    def open(self) -> SessionsRequests:
        return SessionsRequests(self)

    def prompt_bytes(self) -> dict[str, int]:
        return self.messages.prompt_bytes()

    def describe(self) -> dict[str, Any]:
        return {"source": self.wire_name, "turns": self.turns, "messages": "synthetic"}

    def to_wire(self) -> dict[str, Any]:
        return {"messages": self.messages.to_wire(), "turns": self.turns}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SessionsSource:
        return cls(SyntheticSource.from_wire(data["messages"]), int(data["turns"]))


def check(scenario: Scenario) -> None:
    """A session's last turn carries every message before it: refused before any traffic
    when the messages alone (the answers only add to them) are past any model's context."""
    load = scenario.load
    assert isinstance(load, SessionsLoad)
    largest = max(c.prompt_tokens for c in scenario.request.mix)
    if load.turns * largest > MAX_PROMPT_TOKENS:
        raise ScenarioError(
            f"{scenario.source}: load.turns = {load.turns} sends {load.turns} messages of "
            f"{largest:,} tokens in a session's last turn ({load.turns * largest:,} tokens "
            "before the answers), past any model's context (the largest, 10M); give fewer "
            "turns or shorter messages"
        )


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> SessionsSource:
    """The mix's classes sized by the calibration, as synthetic prompts are."""
    load = scenario.load
    assert isinstance(load, SessionsLoad)
    return SessionsSource(fit_messages(scenario, seed, calibration), load.turns)


def _message(base: str, session: int, turn: int) -> str:
    """`base` with the session and turn over its first bytes: unique, the same length."""
    tag = f"{session:010d}.{turn:04d} "
    return (tag + base[len(tag) :]) if len(base) > len(tag) else base


class SessionsRequests:
    """One worker's conversations in progress: session -> its (role, text) turns so far."""

    def __init__(self, source: SessionsSource) -> None:
        self.source = source
        self._by_session = SlotClasses(source.messages.mix(), source.messages.seed)
        self._history: dict[int, list[tuple[str, str]]] = {}
        self._answered_tokens: dict[int, int] = {}

    def request(self, slot: Slot) -> RequestSpec:
        session = slot.session if slot.session is not None else slot.request_id
        turn = slot.turn or 0
        cls = self.source.messages.classes[self._by_session.index(session, 0)]
        history = self._history.get(session, [])
        estimate = cls.prompt_tokens_estimate * (1 + len(history) // 2)
        return RequestSpec(
            request_class=cls.name,
            prompt=_message(cls.prompt, session, turn),
            max_tokens=cls.max_tokens,
            stream=self.source.messages.stream,
            prompt_tokens_estimate=estimate + self._answered_tokens.get(session, 0),
            history=tuple(history),
            keep_answer=turn + 1 < self.source.turns,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        session = slot.session if slot.session is not None else slot.request_id
        if (slot.turn or 0) + 1 >= self.source.turns:  # its last turn: forget it
            self._history.pop(session, None)
            self._answered_tokens.pop(session, None)
            return
        answer = "".join(response.answer) if response.answer is not None else ""
        if response.error is not None or not 200 <= response.status < 300 or not answer:
            return
        self._history.setdefault(session, []).extend(
            (("user", request.prompt), ("assistant", answer))
        )
        self._answered_tokens[session] = self._answered_tokens.get(session, 0) + (
            response.output_tokens or 0
        )
