"""A conversation's turns (`[load] executor = "sessions"`): each sends the whole conversation.

Turn 0 of a session is one user message: its class's synthetic prompt (the scenario's mix,
the class drawn per session from the run's seed), tagged with the session and turn so no
two messages share a prefix. Turn k sends the earlier turns' user messages and the
server's own answers to them, then a new user message of the same class. The answers are
the text the server streamed (`RequestSpec.keep_answer`), so the server's prefix cache and
its context grow as they would with a real client.

With tools offered (`[request] tools`), an answer that calls a tool is answered in turn:
the next turn sends the call back (its id, name and arguments as the model wrote them) and
its result, a message of the session's class in place of the user's next message; the model
then answers from the result, or calls again. A conversation is an agent's loop.

A turn that failed (or answered nothing) is left out of the conversation, as a user would
ask again in other words: the next turn goes on from the last answered one (a call's result
is sent again). An answer is
kept up to ANSWER_BYTES_PER_TOKEN bytes (UTF-8) a token asked: a target that streams far
more than `max_tokens` (up to the 64 MiB body limit) would otherwise have every session
hold that much a turn until its last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects.base import Message, RequestSpec, ResponseSummary, ToolCall
from zqbench.errors import ScenarioError
from zqbench.load import SessionsLoad, Slot
from zqbench.load.arrival_rate import MAX_PLANNED_REQUESTS
from zqbench.scenario import MAX_PROMPT_TOKENS, Scenario
from zqbench.sources.mix import SlotClasses
from zqbench.sources.prompts import tagged
from zqbench.sources.synthetic import SyntheticSource
from zqbench.sources.synthetic import fit as fit_messages

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration

# Bytes of an answer kept a token asked: a token is about 4 bytes of English text, at most
# a few characters of any script; past this the target sent more than `max_tokens`.
ANSWER_BYTES_PER_TOKEN = 32
MESSAGE_BYTES_PER_TOKEN = 4  # a synthetic message's text, as the uncalibrated prompts are
# The conversations held at once, bounded before any traffic (#44 item 1): their text, and
# the request bodies built from it, are most of a sessions run's memory past its users'.
MAX_CONVERSATION_BYTES = 256 * 1024 * 1024


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
    request = scenario.request
    if scenario.api == "anthropic" and request.tools and request.thinking_budget is not None:
        raise ScenarioError(
            f"{scenario.source}: request.tools with request.thinking_budget in sessions on the "
            "Messages API: a call's next turn must send its thinking block back, signed, which "
            'zqbench does not keep; drop thinking_budget (or tools), or use api = "openai"'
        )
    _check_held(scenario, load)


def _check_held(scenario: Scenario, load: SessionsLoad) -> None:
    """ScenarioError unless the conversations alive at once hold at most
    MAX_CONVERSATION_BYTES: each session keeps (turns - 1) earlier turns, a message and its
    answer each (kept up to ANSWER_BYTES_PER_TOKEN a token). Alive at once: the users, or
    the sessions started within one session's longest life, turns x (timeout + think_time),
    and never more than the run starts."""
    mix = scenario.request.mix
    prompt = max(c.prompt_tokens for c in mix)
    answer = max(scenario.request.max_tokens_for(c) for c in mix)
    turn_bytes = prompt * MESSAGE_BYTES_PER_TOKEN + answer * ANSWER_BYTES_PER_TOKEN
    if load.users is not None:
        alive, how = float(load.users), "users"
    else:
        rate = load.rate or 0.0
        life = load.turns * (scenario.request.timeout_s + load.think_time_s)
        alive, how = rate * min(load.duration_s, life), "rate x duration"
        if life < load.duration_s:
            how = "rate x turns x (timeout + think_time)"
    held = alive * (load.turns - 1) * turn_bytes
    if held <= MAX_CONVERSATION_BYTES or not alive * load.turns <= MAX_PLANNED_REQUESTS:
        return  # the plan refuses the second with its own count (rate = 1e308)
    earlier = f"{load.turns - 1:,} earlier turn" + ("s" if load.turns > 2 else "")
    raise ScenarioError(
        f"{scenario.source}: the load holds up to {alive:,.0f} sessions at once ({how}), each "
        f"with up to {earlier} of {turn_bytes:,} bytes ({prompt:,} "
        f"prompt tokens x {MESSAGE_BYTES_PER_TOKEN} + {answer:,} max_tokens x "
        f"{ANSWER_BYTES_PER_TOKEN}): {held / 1e6:,.0f} MB of conversation, past the "
        f"{MAX_CONVERSATION_BYTES / 1e6:,.0f} MB a run holds; give fewer users (or a lower "
        "rate), fewer turns or shorter messages"
    )


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> SessionsSource:
    """The mix's classes sized by the calibration, as synthetic prompts are."""
    load = scenario.load
    assert isinstance(load, SessionsLoad)
    return SessionsSource(fit_messages(scenario, seed, calibration), load.turns)


def _kept(chunks: list[str] | None, limit: int) -> str:
    """The answer's text, cut at `limit` bytes of UTF-8 (never inside a character), without
    joining more of it than that."""
    if chunks is None:
        return ""
    taken, chars = [], 0
    for chunk in chunks:
        taken.append(chunk)
        chars += len(chunk)
        if chars >= limit:  # a character is at least a byte: enough text to cut
            break
    text = "".join(taken)
    if chars < limit // 4:  # a character is at most 4 bytes: within the limit
        return text
    return text[:limit].encode()[:limit].decode("utf-8", "ignore")


class SessionsRequests:
    """One worker's conversations in progress: session -> its (role, text) turns so far."""

    def __init__(self, source: SessionsSource) -> None:
        self.source = source
        self._by_session = SlotClasses(source.messages.mix(), source.messages.seed)
        self._history: dict[int, list[Message]] = {}
        self._answered_tokens: dict[int, int] = {}
        # session -> the calls its last answer made, which its next turn sends results for
        self._calls: dict[int, tuple[ToolCall, ...]] = {}

    def request(self, slot: Slot) -> RequestSpec:
        session = slot.session if slot.session is not None else slot.request_id
        turn = slot.turn or 0
        cls = self.source.messages.classes[self._by_session.index(session, 0)]
        history = self._history.get(session, [])
        estimate = cls.prompt_tokens_estimate * (1 + len(history) // 2)
        return RequestSpec(
            request_class=cls.name,
            prompt=tagged(cls.prompt, f"{session:010d}.{turn:04d} "),
            max_tokens=cls.max_tokens,
            stream=self.source.messages.stream,
            prompt_tokens_estimate=estimate + self._answered_tokens.get(session, 0),
            history=tuple(history),
            results_for=self._calls.get(session, ()),
            keep_answer=turn + 1 < self.source.turns,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        session = slot.session if slot.session is not None else slot.request_id
        if (slot.turn or 0) + 1 >= self.source.turns:  # its last turn: forget it
            self._history.pop(session, None)
            self._answered_tokens.pop(session, None)
            self._calls.pop(session, None)
            return
        limit = request.max_tokens * ANSWER_BYTES_PER_TOKEN
        answer = _kept(response.answer, limit)
        calls = tuple(ToolCall(c.id, c.name, _kept(c.pieces, limit)) for c in response.calls or ())
        if response.error is not None or not 200 <= response.status < 300:
            return
        if not answer and not calls:
            return
        self._history.setdefault(session, []).extend(
            (
                Message("user", request.prompt, request.results_for),
                Message("assistant", answer, calls),
            )
        )
        self._calls[session] = calls
        self._answered_tokens[session] = self._answered_tokens.get(session, 0) + (
            response.output_tokens or 0
        )
