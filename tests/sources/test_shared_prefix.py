"""The shared-prefix source: groups of prompts that share their prefix text, and only that."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import msgpack
import pytest

from zqbench.errors import ScenarioError
from zqbench.load import Slot
from zqbench.scenario import Scenario, load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.shared_prefix import SharedPrefixSource
from zqbench.target.calibrate import Calibration


def _scenario(tmp_path: Path, table: str, extra: str = "") -> Scenario:
    path = tmp_path / "t.toml"
    path.write_text(
        'name = "t"\n[load]\nexecutor = "constant-arrival-rate"\nrate = 10\nduration = "1s"\n'
        f"[request]\nmax_tokens = 7\n{extra}\n[request.shared_prefix]\n{table}\n"
    )
    return load_scenario(str(path))


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters two prompts share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_a_groups_requests_share_exactly_its_prefix(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "prefixes = 4\nprefix_tokens = 200\nsuffix_tokens = 40")
    source = fit_source(scenario, 3, None)
    assert isinstance(source, SharedPrefixSource)
    requests = source.open()
    specs = [requests.request(Slot(i, 0)) for i in range(400)]
    # A byte a token without a calibration, the BOS token counted in the prefix.
    assert {len(s.prompt) for s in specs} == {199 + 40}
    assert all(s.prompt_tokens_estimate == 240 and s.max_tokens == 7 for s in specs)
    by_group = Counter(s.source_row for s in specs)
    assert set(by_group) == {0, 1, 2, 3} and min(by_group.values()) > 70  # about 100 each
    for a, b in itertools.pairwise(specs):
        shared = _common_prefix(a.prompt, b.prompt)
        if a.source_row == b.source_row:
            assert shared >= 199  # the whole prefix, then the request ids differ
            assert shared < 199 + 11
        else:
            assert shared < 8  # another group: nothing to reuse
    assert len({s.prompt for s in specs}) == 400  # no two requests alike


def test_groups_are_drawn_by_request_id_and_seed(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "prefixes = 3\nprefix_tokens = 20\nsuffix_tokens = 20")
    one, two = fit_source(scenario, 1, None), fit_source(scenario, 1, None)
    ids = [5, 900, 17, 3]
    groups = [one.open().request(Slot(i, 0)).source_row for i in ids]
    assert [two.open().request(Slot(i, 0)).source_row for i in ids] == groups
    other = fit_source(scenario, 2, None).open()
    assert [other.request(Slot(i, 0)).source_row for i in range(50)] != [
        one.open().request(Slot(i, 0)).source_row for i in range(50)
    ]
    first, again = one.open(), one.open()  # a user's walk is its own, in any worker
    walk = [first.request(Slot((4 << 32) | j, 0, user=4)).source_row for j in range(20)]
    assert walk == [again.request(Slot((4 << 32) | j, 0, user=4)).source_row for j in range(20)]
    assert len(set(walk)) > 1


def test_a_calibration_sizes_prefix_and_suffix(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "prefixes = 2\nprefix_tokens = 101\nsuffix_tokens = 50")
    calibration = Calibration(0.25, 1.0, "usage", ((400, 101), (800, 201)))  # 4 bytes a token
    source = fit_source(scenario, 0, calibration)
    assert len(source.prefixes[0]) == calibration.bytes_for(101) == 400
    assert len(source.prefixes[0]) + len(source.suffix) == calibration.bytes_for(151) == 600


def test_the_source_crosses_the_wire_unchanged(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "prefixes = 2\nprefix_tokens = 30\nsuffix_tokens = 12")
    source = fit_source(scenario, 0, None)
    back = source_from_wire(msgpack.unpackb(msgpack.packb(source_to_wire(source))))
    assert back == source


@pytest.mark.parametrize(
    ("table", "extra", "message"),
    [
        ("prefixes = 2\nprefix_tokens = 30", "",
         "request.shared_prefix.suffix_tokens is missing (give prefixes, prefix_tokens, "
         "suffix_tokens)"),
        ("prefixes = 0\nprefix_tokens = 30\nsuffix_tokens = 1", "",
         "request.shared_prefix.prefixes = 0 must be >= 1"),
        ("prefixes = 2\nprefix_tokens = 30\nsuffix_tokens = 1", "prompt_tokens = 5",
         "request.shared_prefix and request.prompt_tokens are exclusive; the shared prefix "
         "makes the prompts"),
    ],
)  # fmt: skip
def test_bad_keys_are_one_line(tmp_path: Path, table: str, extra: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        _scenario(tmp_path, table, extra)
    assert info.value.message == f"{tmp_path}/t.toml: {message}"


def test_the_bundled_pair_has_the_same_load_and_prompt_length() -> None:
    warm, cold = load_scenario("shared-prefix"), load_scenario("shared-prefix-cold")
    assert warm.load == cold.load and warm.request.max_tokens == cold.request.max_tokens
    shared = warm.request.shared_prefix
    assert shared is not None
    assert cold.request.mix[0].prompt_tokens == shared.prefix_tokens + shared.suffix_tokens
