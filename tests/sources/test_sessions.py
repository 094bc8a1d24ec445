"""The sessions source: each turn carries the conversation so far, the answers included."""

from __future__ import annotations

from pathlib import Path

import msgpack

from zqbench.dialects.base import ResponseSummary
from zqbench.load import Slot
from zqbench.scenario import load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.sessions import SessionsSource


def _source(tmp_path: Path) -> SessionsSource:
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[load]\nexecutor = "sessions"\nrate = 1\nduration = "5s"\nturns = 3\n'
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
    assert second.history == (("user", first.prompt), ("assistant", "the answer"))
    assert second.prompt.startswith("0000000002.0001 ") and second.prompt[16:] == first.prompt[16:]
    # A refused turn is left out: the next one goes on from the last answer.
    requests.answered(Slot(7, 0, session=2, turn=1), second, _answer("busy", status=429))
    third = requests.request(Slot(8, 0, session=2, turn=2))
    assert third.history == second.history and not third.keep_answer  # the last turn
    requests.answered(Slot(8, 0, session=2, turn=2), third, _answer("end"))
    assert requests.request(Slot(7, 0, session=2, turn=1)).history == ()  # forgotten


def test_the_source_travels(tmp_path: Path) -> None:
    source = _source(tmp_path)
    back = source_from_wire(msgpack.unpackb(msgpack.packb(source_to_wire(source))))
    assert back == source and source.describe() == {
        "source": "sessions",
        "turns": 3,
        "messages": "synthetic",
    }
