"""The synthetic source: what a slot asks, by request id or by user, and its wire form."""

from __future__ import annotations

from zqbench.load import Slot
from zqbench.scenario import load_scenario
from zqbench.sources import source_from_wire, source_to_wire
from zqbench.sources.mix import ClassPicker
from zqbench.sources.synthetic import fit


def test_each_request_has_its_class_prompt_length_with_its_own_first_bytes() -> None:
    source = fit(load_scenario("mixed-length"), seed=1, calibration=None)
    requests = source.open()
    specs = [requests.request(Slot(i, 0)) for i in range(200)]
    by_class = {c.name: c for c in source.classes}
    for i, spec in enumerate(specs):
        cls = by_class[spec.request_class]
        assert len(spec.prompt) == len(cls.prompt)
        assert spec.prompt.startswith(f"{i:010d} ")
        assert spec.max_tokens == cls.max_tokens
        assert spec.prompt_tokens_estimate == cls.prompt_tokens_estimate
    assert len({s.prompt for s in specs}) == 200  # no two requests share a prefix


def test_a_users_classes_follow_its_own_stream() -> None:
    source = fit(load_scenario("mixed-length"), seed=4, calibration=None)
    requests = source.open()
    picker = ClassPicker(source.mix(), 4, 7)
    names = [c.name for c in source.classes]
    for seq in range(50):
        spec = requests.request(Slot((7 << 32) | seq, 0, user=7))
        assert spec.request_class == names[picker.next_index()]


def test_the_source_crosses_the_wire_unchanged() -> None:
    source = fit(load_scenario("mixed-length"), seed=2, calibration=None)
    assert source_from_wire(source_to_wire(source)) == source
