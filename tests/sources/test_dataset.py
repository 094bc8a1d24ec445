"""The dataset source: formats read, rows checked with exact messages, rows chosen by seed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import msgpack
import numpy as np
import pytest

from zqbench.dialects import DIALECTS
from zqbench.dialects.base import DialectConfig, Message, RequestSpec
from zqbench.errors import EXIT_USAGE, ScenarioError
from zqbench.load import Slot
from zqbench.scenario import Scenario, load_scenario
from zqbench.sources import fit_source, source_from_wire, source_to_wire
from zqbench.sources.dataset import DatasetSource
from zqbench.sources.dataset_rows import DatasetError, Row, read_row, scan


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def _scenario(tmp_path: Path, dataset: str, api: str = "openai", extra: str = "") -> Scenario:
    text = f"""
name = "t"
api = "{api}"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "1s"
[request]
max_tokens = 9
dataset = {dataset}
{extra}
"""
    path = tmp_path / "t.toml"
    path.write_text(text)
    return load_scenario(str(path))


# --------------------------------------------------------------------------- formats


def test_jsonl_rows_keep_their_spans_and_the_file_hash(tmp_path: Path) -> None:
    rows = [
        {"prompt": "héllo wörld", "output_tokens": 7},
        {"system": "be terse", "messages": [{"role": "user", "content": "a"},
                                            {"role": "assistant", "content": "b"},
                                            {"role": "user", "content": "c"}]},
        {"prompt": "x", "max_tokens": 3},
    ]  # fmt: skip
    path = _jsonl(tmp_path / "d.jsonl", rows)
    path.write_text(path.read_text().replace("\n", "\n\n", 1))  # a blank line is skipped
    index = scan(path, "auto")
    assert index.file.format == "jsonl" and index.file.rows == 3
    assert index.file.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert index.output_tokens.tolist() == [7, -1, 3]
    assert index.prompt_bytes.tolist() == [len("héllo wörld".encode()), 8 + 3, 1]
    read = [
        read_row(str(path), int(o), int(n), "jsonl")
        for o, n in zip(index.offsets, index.lengths, strict=True)
    ]
    assert read[0] == Row(None, (), "héllo wörld", 7)
    assert read[1] == Row("be terse", (Message("user", "a"), Message("assistant", "b")), "c", None)


def test_openai_request_lines_and_batch_lines(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "hi"}]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": parts}]
    body = {"model": "m", "messages": messages, "max_completion_tokens": 5}
    batch = {"custom_id": "1", "method": "POST", "url": "/v1/chat/completions", "body": body}
    path = _jsonl(tmp_path / "req.jsonl", [body, batch])
    index = scan(path, "auto")
    assert index.file.format == "chat-completions" and index.output_tokens.tolist() == [5, 5]
    row = read_row(str(path), int(index.offsets[1]), int(index.lengths[1]), "chat-completions")
    assert row == Row("s", (), "hi", 5)


def test_sharegpt_array_with_non_ascii_text_is_cut_at_byte_offsets(tmp_path: Path) -> None:
    answer = "ü" * 400  # 800 bytes: 200 tokens at 4 bytes a token
    convs = [
        {"id": "a", "conversations": [{"from": "human", "value": "naïve “quotes” ]["},
                                      {"from": "gpt", "value": answer}]},
        {"id": "b", "conversations": [{"from": "system", "value": "sys"},
                                      {"from": "human", "value": "日本語"},
                                      {"from": "gpt", "value": "ok"}]},
    ]  # fmt: skip
    path = tmp_path / "sg.json"
    path.write_text(
        "\ufeff[\n " + ",\n ".join(json.dumps(c, ensure_ascii=False) for c in convs) + "\n]\n"
    )
    index = scan(path, "auto")
    assert index.file.format == "sharegpt" and index.file.rows == 2
    assert index.answer_bytes.tolist() == [800, 2] and index.output_tokens.tolist() == [-1, -1]
    rows = [
        read_row(str(path), int(o), int(n), "sharegpt")
        for o, n in zip(index.offsets, index.lengths, strict=True)
    ]
    assert rows == [Row(None, (), "naïve “quotes” ][", None), Row("sys", (), "日本語", None)]


def test_sharegpt_jsonl_is_read_as_sharegpt(tmp_path: Path) -> None:
    conv = {
        "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "abcdefgh"}]
    }
    index = scan(_jsonl(tmp_path / "sg.jsonl", [conv]), "auto")
    assert index.file.format == "sharegpt" and index.answer_bytes.tolist() == [8]


# --------------------------------------------------------------------------- bad input


_NO_USER_END = (
    '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}'
)
_BAD = [
    ("", "auto", "dataset {p}: the file is empty; give a file with rows"),
    ("\n\n", "jsonl", "dataset {p}: no rows in it; give a file with rows"),
    ('{"prompt": "a"}\n{"prompt": "b"\n', "auto",
     "dataset {p} line 2: not JSON; give one JSON object"),
    ('{"prompt": "a"}\n[1]\n', "auto",
     "dataset {p} line 2: not a JSON object; give one object a row"),
    ('{"prompt": "a", "max_tokens": -3}\n', "auto",
     'dataset {p} line 1: "max_tokens" is -3, not a positive integer; fix it or leave it out'),
    ('{"prompt": ""}\n', "auto",
     'dataset {p} line 1: "prompt" is not a non-empty string; give the text'),
    # Each of these four ended a run with exit 5 (#44 item 5).
    ('{"prompt": "a", "output_tokens": 10000000}\n', "auto",
     'dataset {p} line 1: "output_tokens" is 10000000, past 1,000,000 (longer than any model '
     "answers); fix it or leave it out"),
    ('{"prompt": "a"}\n{"prompt": "a", "max_tokens": 9200000000000000000}\n', "auto",
     'dataset {p} line 2: "max_tokens" is 9200000000000000000, past 1,000,000 (longer than '
     "any model answers); fix it or leave it out"),
    ('{"prompt": "a \\ud800 b"}\n', "auto",
     "dataset {p} line 1: the text holds a lone UTF-16 surrogate ('\\ud800'), which no request "
     "can carry; fix the text"),
    ('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "auto",
     "dataset {p} line 1: nested deeper than a JSON reader goes; give one flat object a row"),
    ('[{"conversations": ' + "[" * 100_000 + "]" * 100_000 + "}]", "auto",
     "dataset {p} element 1: nested deeper than a JSON reader goes; give one flat object a row"),
    ('{"text": "a"}\n', "jsonl",
     'dataset {p} line 1: no "prompt" or "messages"; give the request\'s text there'),
    (_NO_USER_END + "\n", "auto",
     'dataset {p} line 1: "messages" does not end with a user message; end it so'),
    ('{"messages": [{"role": "tool", "content": "a"}]}\n', "auto",
     'dataset {p} line 1: "messages[0].role" is "tool"; give user or assistant'
     " (a system message only first)"),
    ('[{"conversations": [{"from": "human", "value": "x"}]}', "auto",
     "dataset {p} element 2: not valid JSON, the array is not closed, or longer than 16 MiB; "
     "fix the file"),
    ('[{"conversations": [{"from": "bot", "value": "x"}]}]', "auto",
     'dataset {p} element 1: "conversations[0].from" is "bot"; give human or gpt'),
    ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', "auto",
     'dataset {p} element 1: "conversations" has no human turn; give one'),
    ('[{"prompt": "a"}]', "jsonl",
     "dataset {p}: a JSON array is read as format sharegpt only; give one object a line for"
     ' format jsonl, or set format = "sharegpt"'),
]  # fmt: skip


@pytest.mark.parametrize(("content", "fmt", "message"), _BAD, ids=lambda v: str(v)[:40])
def test_a_bad_dataset_is_one_line_naming_the_row_and_the_fix(
    tmp_path: Path, content: str, fmt: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError) as info:
        scan(path, fmt)
    assert info.value.message == message.format(p=path)
    assert info.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("first", [True, False])
def test_a_row_past_16_mib_is_refused_before_the_rest_of_it_is_read(
    tmp_path: Path, first: bool
) -> None:
    # Unbounded, a 1 GiB line took over 10 GiB (#44 item 1). The row here is 17 MiB.
    path = tmp_path / "big.jsonl"
    row = json.dumps({"prompt": "a" * (17 << 20)}) + "\n"
    path.write_text(row if first else '{"prompt": "hi"}\n' + row)
    line = 1 if first else 2
    with pytest.raises(DatasetError) as info:
        scan(path, "auto")
    assert info.value.message == (
        f"dataset {path} line {line}: longer than 16 MiB; give one request a row"
    )


def test_scenario_keys_are_checked_before_any_load(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        _scenario(tmp_path, '"missing.jsonl"')
    assert info.value.message == (
        f'{tmp_path}/t.toml: request.dataset.path = "missing.jsonl" names no file '
        f"(from {tmp_path}); give the dataset's path"
    )
    _jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}])
    with pytest.raises(ScenarioError) as info:
        _scenario(tmp_path, '{ path = "d.jsonl", order = "random" }')
    assert info.value.message == (
        f'{tmp_path}/t.toml: request.dataset.order = "random" is not one of sequential, shuffle'
    )
    with pytest.raises(ScenarioError) as info:
        _scenario(tmp_path, '{ path = "d.jsonl", prompt_tokens = [9, 2] }')
    assert info.value.message == (
        f"{tmp_path}/t.toml: request.dataset.prompt_tokens = [9, 2] must be [min, max] "
        "tokens: whole numbers, 0 <= min <= max"
    )
    with pytest.raises(ScenarioError) as info:
        _scenario(tmp_path, '"d.jsonl"', extra="prompt_tokens = 5")
    assert info.value.message == (
        f"{tmp_path}/t.toml: request.dataset and request.prompt_tokens are exclusive; the "
        "dataset makes the prompts"
    )


def test_filters_that_keep_nothing_say_so(tmp_path: Path) -> None:
    _jsonl(tmp_path / "d.jsonl", [{"prompt": "abcd" * 10}])  # 10 tokens at 4 bytes a token
    scenario = _scenario(tmp_path, '{ path = "d.jsonl", prompt_tokens = [100, 200] }')
    with pytest.raises(DatasetError) as info:
        fit_source(scenario, 0, None)
    assert info.value.message == (
        f"dataset {tmp_path / 'd.jsonl'}: none of its 1 rows pass the filters "
        "(prompt_tokens [100, 200], output_tokens None); widen them"
    )


# --------------------------------------------------------------------------- the source


def _rows(n: int) -> list[dict[str, object]]:
    return [{"prompt": f"row {i} " + "w" * (4 * i), "output_tokens": i + 1} for i in range(n)]


def test_rows_by_request_id_filtered_and_shuffled_by_seed(tmp_path: Path) -> None:
    _jsonl(tmp_path / "d.jsonl", _rows(10))
    scenario = _scenario(
        tmp_path, '{ path = "d.jsonl", order = "shuffle", output_tokens = [3, 8] }'
    )
    source = fit_source(scenario, 7, None)
    assert isinstance(source, DatasetSource)
    kept = sorted(source.rows.tolist())
    assert kept == [2, 3, 4, 5, 6, 7]  # output_tokens i + 1 in [3, 8]
    again = fit_source(scenario, 7, None).rows.tolist()
    other = fit_source(scenario, 8, None).rows.tolist()
    assert source.rows.tolist() == again and sorted(other) == kept and other != again
    requests = source.open()
    specs = [requests.request(Slot(i, 0)) for i in range(12)]  # wraps after 6
    assert [s.source_row for s in specs] == again + again[:6]
    for spec in specs:
        assert spec.prompt.startswith(f"row {spec.source_row} ")
        assert spec.max_tokens == spec.source_row + 1 and spec.exact_output  # openai forces


def test_a_virtual_user_walks_the_rows_from_its_own_seeded_start(tmp_path: Path) -> None:
    _jsonl(tmp_path / "d.jsonl", _rows(5))
    source = fit_source(_scenario(tmp_path, '"d.jsonl"', api="anthropic"), 3, None)
    a, b = source.open(), source.open()
    user = [a.request(Slot((7 << 32) | j, 0, user=7)).source_row for j in range(6)]
    assert user[1:] == [(user[0] + j) % 5 for j in range(1, 6)]
    assert [b.request(Slot((7 << 32) | j, 0, user=7)).source_row for j in range(6)] == user
    spec = a.request(Slot(0, 0))
    assert not spec.exact_output  # the Messages API cannot force a length
    assert source.describe()["output_lengths"] == (
        "not forced: the Messages API has no minimum output length"
    )


def test_the_source_crosses_the_wire_unchanged(tmp_path: Path) -> None:
    _jsonl(tmp_path / "d.jsonl", _rows(4))
    source = fit_source(_scenario(tmp_path, '{ path = "d.jsonl", order = "shuffle" }'), 1, None)
    wire = msgpack.unpackb(msgpack.packb(source_to_wire(source)))
    back = source_from_wire(wire)
    assert isinstance(back, DatasetSource) and back.describe() == source.describe()
    for name in ("rows", "offsets", "lengths", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(back, name), getattr(source, name))
    assert [back.open().request(Slot(i, 0)) for i in range(4)] == [
        source.open().request(Slot(i, 0)) for i in range(4)
    ]


def test_bundled_dataset_scenario_loads(tmp_path: Path) -> None:
    scenario = load_scenario("dataset")
    assert scenario.request.dataset is not None
    assert scenario.to_dict()["request"]["dataset"]["path"] == "bundled:data/chat.jsonl"


# --------------------------------------------------------------------------- dialects


def _body(api: str, spec: RequestSpec) -> dict[str, object]:
    dialect = DIALECTS[api](DialectConfig(model="m"))
    return json.loads(dialect.build(spec).body)


def test_openai_body_carries_the_conversation_and_the_exact_length() -> None:
    history = (Message("user", "u"), Message("assistant", "a"))
    spec = RequestSpec("c", "last", 12, system="sys", history=history, exact_output=True)
    assert _body("openai", spec) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "last"},
        ],
        "max_tokens": 12,
        "min_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    plain = dataclasses.replace(spec, system=None, history=(), exact_output=False)
    assert _body("openai", plain)["messages"] == [{"role": "user", "content": "last"}]


def test_anthropic_body_has_the_system_prompt_at_the_top() -> None:
    spec = RequestSpec(
        "c",
        "q",
        5,
        stream=False,
        system="sys",
        history=(Message("user", "u"), Message("assistant", "a")),
    )
    assert _body("anthropic", spec) == {
        "model": "m",
        "max_tokens": 5,
        "system": "sys",
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "q"},
        ],
        "stream": False,
    }


def test_a_sharegpt_rows_output_length_is_its_answers_in_estimated_tokens(tmp_path: Path) -> None:
    convs = [{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "é" * n}]}
             for n in (2, 200)]  # fmt: skip
    (tmp_path / "sg.json").write_text(json.dumps(convs))
    source = fit_source(_scenario(tmp_path, '"sg.json"'), 0, None)
    assert source.output_tokens.tolist() == [1, 100]  # 4 and 400 bytes at 4 bytes a token
    assert [source.open().request(Slot(i, 0)).max_tokens for i in range(2)] == [1, 100]


def test_a_worker_without_the_masters_file_says_so(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", _rows(3))
    source = fit_source(_scenario(tmp_path, '"d.jsonl"'), 0, None)
    path.write_text(path.read_text() + '{"prompt": "one more"}\n')
    with pytest.raises(DatasetError) as info:
        source.open()
    size = path.stat().st_size
    assert info.value.message == (
        f"dataset {path} on this worker: {size} bytes, not {source.file.size}; give every "
        "worker the master's file at the same path"
    )


def test_rows_past_the_bound_are_refused_as_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index keeps 40 bytes a row and the source 40 more in each process (#44 item 1);
    # the test lowers the bound rather than write millions of rows.
    monkeypatch.setattr("zqbench.sources.dataset_rows.MAX_DATASET_ROWS", 2)
    path = _jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}])
    with pytest.raises(DatasetError) as info:
        scan(path, "auto")
    assert info.value.message == (
        f"dataset {path} line 3: more than 2 rows; give a file of at most 2 (a sample of the rows)"
    )
    assert scan(_jsonl(tmp_path / "ok.jsonl", [{"prompt": "a"}] * 2), "auto").file.rows == 2
