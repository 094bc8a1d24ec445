"""The trace source: rows that share leading hash ids share exactly that leading text."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest

from zqbench.load import Slot
from zqbench.load.trace_file import TraceError
from zqbench.scenario import Scenario, load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.trace import TraceSource, _id_words
from zqbench.target.calibrate import Calibration

ROWS = [
    {"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [7, 8, 9]},
    {"timestamp": 10, "input_length": 32, "output_length": 6, "hash_ids": [7, 8]},
    {"timestamp": 20, "input_length": 48, "output_length": 7, "hash_ids": [7, 3, 4]},
]
CALIBRATION = Calibration(0.25, 5.0, "usage", ((100, 30), (200, 55)))  # 4 bytes a token


def _scenario(tmp_path: Path, rows: list[dict[str, object]], api: str = "openai") -> Scenario:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "t.toml").write_text(
        f'name = "t"\napi = "{api}"\n[load]\nexecutor = "trace"\ntrace = "t.jsonl"\n'
        "block_tokens = 16\n"
    )
    return load_scenario(str(tmp_path / "t.toml"))


def _prompts(source: TraceSource) -> list[str]:
    requests = source.open()
    return [requests.request(Slot(i, 0)).prompt for i in range(3)]


def _common(a: str, b: str) -> int:
    """How many leading characters the two strings share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_shared_leading_ids_send_the_same_leading_text(tmp_path: Path) -> None:
    source = fit_source(_scenario(tmp_path, ROWS), seed=3, calibration=CALIBRATION)
    assert isinstance(source, TraceSource) and source.block_bytes == 64
    a, b, c = _prompts(source)
    # Each prompt is its length's bytes: (tokens - 5 template tokens) x 4 bytes a token.
    assert [len(p) for p in (a, b, c)] == [140, 108, 172]
    assert b == a[: len(b)]  # blocks 7 and 8, whole: b is a's first 108 bytes
    # Block 7 (64 bytes), then block 3's id in words against block 8's.
    assert 64 <= _common(a, c) < 64 + len(_id_words(8))
    assert a.startswith(_id_words(7)) and a[64:].startswith(_id_words(8))
    assert _id_words(8) == "on the the " and _id_words(286**3 + 1) == "of the the of "
    again = requests = source.open()
    assert requests.request(Slot(2, 0)).prompt == c  # a fresh cursor reads the same row
    other = fit_source(_scenario(tmp_path, ROWS), seed=4, calibration=CALIBRATION)
    # Another seed: the same ids' words, then other text.
    assert _common(_prompts(other)[0], a) < len(_id_words(7)) + 8
    spec = again.request(Slot(2, 0))
    assert (spec.max_tokens, spec.exact_output, spec.source_row) == (7, True, 2)
    assert spec.prompt_tokens_estimate == 48


def test_tokens_rows_get_text_of_their_own(tmp_path: Path) -> None:
    rows = [{"timestamp": t, "input_tokens": 40, "output_tokens": 3} for t in (0, 5)]
    source = fit_source(_scenario(tmp_path, rows).with_overrides(), seed=0, calibration=None)
    assert isinstance(source, TraceSource)
    requests = source.open()
    a, b = (requests.request(Slot(i, 0)).prompt for i in range(2))
    assert len(a) == len(b) == 39  # a byte a token, one of BOS
    assert _common(a, b) < 3


def test_the_source_travels_and_checks_the_workers_copy(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, ROWS, api="anthropic")
    source = fit_source(scenario, seed=1, calibration=None)
    wire = msgpack.unpackb(msgpack.packb(source_to_wire(source)))
    back = source_from_wire(wire)
    assert back == source and _prompts(back) == _prompts(source)
    assert source.describe()["output_lengths"] == (
        "not forced: the Messages API has no minimum output length"
    )
    assert source.describe()["ideal_reuse"] == pytest.approx((32 + 16) / 120)
    (tmp_path / "t.jsonl").write_text("{}\n")
    with pytest.raises(TraceError) as e:
        source.open()
    assert str(e.value) == (
        f"trace {tmp_path / 't.jsonl'} on this worker: 3 bytes, not {source.size}; give every "
        "worker the master's file at the same path"
    )
