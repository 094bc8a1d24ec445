"""The sessions source: each turn carries the conversation so far, the answers included."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from zqbench.dialects.base import CallPieces, Message, ResponseSummary, ToolCall
from zqbench.errors import ScenarioError
from zqbench.load import Slot
from zqbench.scenario import load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.sessions import SessionsSource


def _source(tmp_path: Path, turns: int = 3) -> SessionsSource:
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[load]\nexecutor = "sessions"\nrate = 1\nduration = "5s"\n'
        f"turns = {turns}\n"
        "[request]\nprompt_tokens = 40\nmax_tokens = 7\n"
    )
    source = fit_source(load_scenario(str(tmp_path / "s.toml")), seed=0, calibration=None)
    assert isinstance(source, SessionsSource)
    return source


def _answer(text: str, status: int = 200) -> ResponseSummary:
    return ResponseSummary(status=status, output_tokens=len(text), answer=[text[:2], text[2:]])


def test_each_turn_sends_the_conversation_with_the_servers_answers(tmp_path: Path) -> None:
    requests = _source(tmp_path).open()
    first = requests.request(Slot(6, 0, session=2, turn=0))
    assert first.history == () and first.keep_answer and first.max_tokens == 7
    assert len(first.prompt) == 39 and first.prompt.startswith("0000000002.0000 ")
    requests.answered(Slot(6, 0, session=2, turn=0), first, _answer("the answer"))
    second = requests.request(Slot(7, 0, session=2, turn=1))
    assert second.history == (Message("user", first.prompt), Message("assistant", "the answer"))
    assert second.prompt.startswith("0000000002.0001 ") and second.prompt[16:] == first.prompt[16:]
    # A refused turn is left out: the next one goes on from the last answer.
    requests.answered(Slot(7, 0, session=2, turn=1), second, _answer("busy", status=429))
    third = requests.request(Slot(8, 0, session=2, turn=2))
    assert third.history == second.history and not third.keep_answer  # the last turn
    requests.answered(Slot(8, 0, session=2, turn=2), third, _answer("end"))
    assert requests.request(Slot(7, 0, session=2, turn=1)).history == ()  # forgotten


def _called(*calls: tuple[str, str, list[str]], status: int = 200) -> ResponseSummary:
    return ResponseSummary(
        status=status, output_tokens=5, answer=[], calls=[CallPieces(*c) for c in calls]
    )


def test_a_call_is_answered_by_the_next_turn_until_a_turn_answers_it(tmp_path: Path) -> None:
    """The next turn after a call sends the call back and its result (the turn's message);
    a result the server refused is sent again; a text answer ends the loop."""
    requests = _source(tmp_path, turns=5).open()
    first = requests.request(Slot(6, 0, session=2, turn=0))
    requests.answered(
        Slot(6, 0, session=2, turn=0), first, _called(("c1", "lookup", ['{"q": ', '"x"}']))
    )
    second = requests.request(Slot(7, 0, session=2, turn=1))
    call = ToolCall("c1", "lookup", '{"q": "x"}')
    assert second.results_for == (call,) and second.prompt.startswith("0000000002.0001 ")
    assert second.history == (Message("user", first.prompt), Message("assistant", "", (call,)))
    requests.answered(Slot(7, 0, session=2, turn=1), second, _called(status=429))
    third = requests.request(Slot(8, 0, session=2, turn=2))
    assert third.results_for == (call,) and third.history == second.history  # sent again
    requests.answered(Slot(8, 0, session=2, turn=2), third, _answer("found it"))
    fourth = requests.request(Slot(9, 0, session=2, turn=3))
    assert fourth.results_for == ()  # the user's next message
    assert fourth.history[2:] == (
        Message("user", third.prompt, (call,)),
        Message("assistant", "found it"),
    )


def test_the_source_travels(tmp_path: Path) -> None:
    source = _source(tmp_path)
    back = source_from_wire(msgpack.unpackb(msgpack.packb(source_to_wire(source))))
    assert back == source and source.describe() == {
        "source": "sessions",
        "turns": 3,
        "messages": "synthetic",
    }


def test_an_answer_past_its_max_tokens_is_kept_cut(tmp_path: Path) -> None:
    """A target may stream far more than max_tokens asked (up to the 64 MiB body limit):
    each session keeps every answer until its last turn, so 100,000 users would hold that
    many times the excess. The kept answer is cut at ANSWER_BYTES_PER_TOKEN a token asked
    (#44 item 1); an answer within it is kept whole."""
    from zqbench.sources.sessions import ANSWER_BYTES_PER_TOKEN

    requests = _source(tmp_path).open()
    first = requests.request(Slot(6, 0, session=2, turn=0))
    requests.answered(Slot(6, 0, session=2, turn=0), first, _answer("é" * 1_000_000))
    kept = requests.request(Slot(7, 0, session=2, turn=1)).history[1].text
    assert ANSWER_BYTES_PER_TOKEN == 32
    assert len(kept.encode()) == 7 * 32  # max_tokens = 7: 112 two-byte characters
    assert kept == "é" * 112
    whole = "x" * (7 * 32)
    requests.answered(Slot(9, 0, session=3, turn=0), first, _answer(whole))
    assert requests.request(Slot(10, 0, session=3, turn=1)).history[1].text == whole


def _check(tmp_path: Path, load: str, timeout: str = "60s") -> None:
    from zqbench.sources.sessions import check

    (tmp_path / "c.toml").write_text(
        f'name = "c"\n[load]\nexecutor = "sessions"\nduration = "60s"\n{load}\n'
        f'[request]\nprompt_tokens = 128\nmax_tokens = 32\ntimeout = "{timeout}"\n'
    )
    check(load_scenario(str(tmp_path / "c.toml")))


def test_the_conversations_held_at_once_are_bounded_before_any_traffic(tmp_path: Path) -> None:
    """Each session holds its conversation until its last turn: (turns - 1) x (its message,
    4 bytes a token, and its answer, kept up to 32 bytes a token). users = 100,000 with
    turns = 10 would hold 1.4 GB of text, and the bodies built from it as much again."""
    _check(tmp_path, "users = 100000\nturns = 2")  # 100,000 x 1,536 B = 154 MB: accepted
    with pytest.raises(ScenarioError) as err:
        _check(tmp_path, "users = 100000\nturns = 3")
    assert str(err.value) == (
        f"{tmp_path / 'c.toml'}: the load holds up to 100,000 sessions at once (users), each "
        "with up to 2 earlier turns of 1,536 bytes (128 prompt tokens x 4 + 32 max_tokens x "
        "32): 307 MB of conversation, past the 268 MB a run holds; give fewer users (or a "
        "lower rate), fewer turns or shorter messages"
    )
    # At a rate: the sessions started within one session's longest life, turns x (timeout
    # + think_time), and never more than the run starts (rate x duration).
    with pytest.raises(ScenarioError, match=r"up to 60,000 sessions at once \(rate x dura"):
        _check(tmp_path, 'rate = 1000\nturns = 10\nthink_time = "1s"')  # lives 610 s
    with pytest.raises(ScenarioError, match=r"up to 20,000 sessions at once \(rate x turns"):
        _check(tmp_path, 'rate = 1000\nturns = 10\nthink_time = "1s"', timeout="1s")
    _check(tmp_path, 'rate = 100\nturns = 10\nthink_time = "1s"', timeout="1s")  # 2,000
    _check(tmp_path, 'rate = 10\nturns = 10\nthink_time = "1s"')  # 600 x 13.8 KB = 8.3 MB
