"""The trace executor and its file: rows checked with exact messages, times kept and scaled,
rows dealt to workers, the ideal reuse counted from the hash ids."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from zqbench.errors import OptionError, ScenarioError
from zqbench.load import TraceLoad, work_from_wire, work_to_wire
from zqbench.load.trace import TraceWork
from zqbench.load.trace_file import TraceError, TraceReader, scaled_ns, scan
from zqbench.scenario import Scenario, load_scenario


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(ts: float, n: int, ids: list[int], out: int = 5) -> dict[str, object]:
    return {"timestamp": ts, "input_length": n, "output_length": out, "hash_ids": ids}


def _scenario(tmp_path: Path, load: str, request: str = "") -> Scenario:
    path = tmp_path / "t.toml"
    path.write_text(f'name = "t"\n[load]\nexecutor = "trace"\n{load}\n{request}')
    return load_scenario(str(path))


ROWS = [
    _row(1000, 20, [0, 1, 2]),  # blocks of 8 tokens: 3 blocks, the last of 4 tokens
    _row(1500, 16, [0, 1]),  # both seen: 16 tokens
    _row(1500, 24, [0, 3, 4]),  # only block 0 leads with a seen id: 8 tokens
    _row(4000, 9, [0, 1]),  # both seen, but 9 tokens long: 9
]


def test_times_are_kept_from_the_first_row_and_reuse_is_counted(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "t.jsonl", ROWS)
    index = scan(path, "auto", 8)
    assert index.file.format == "mooncake" and index.file.rows == 4
    assert index.times_ns.tolist() == [0, 500_000_000, 500_000_000, 3_000_000_000]
    assert index.input_tokens == 69
    assert index.ideal_hit_tokens == 16 + 8 + 9
    assert index.ideal_reuse == pytest.approx(33 / 69)


def test_the_plan_scales_time_deals_rows_round_robin_and_cuts(tmp_path: Path) -> None:
    _jsonl(tmp_path / "t.jsonl", ROWS)
    s = _scenario(tmp_path, 'trace = "t.jsonl"\nblock_tokens = 8\ntime_scale = 2')
    assert isinstance(s.load, TraceLoad) and s.load.duration_s == 6.0
    plan = s.load.plan(2, seed=0)
    assert plan.offered == 4 and plan.loop == "open"
    assert plan.offered_rate == pytest.approx(4 / 6)
    w0, w1 = plan.works
    assert isinstance(w0, TraceWork) and isinstance(w1, TraceWork)
    assert w0.times_ns.tolist() == [0, 1_000_000_000]
    assert w1.times_ns.tolist() == [1_000_000_000, 6_000_000_000]
    assert w1.request_ids().tolist() == [1, 3]
    assert [(s.name, s.start_s, s.end_s) for s in plan.stages] == [("trace", 0.0, 6.0)]
    # --rate-scale 4 replays four times faster; --duration-scale 0.5 keeps the first half.
    fast = s.scaled(rate_scale=4.0, duration_scale=0.5)
    assert fast.load.duration_s == 0.75
    assert fast.load.plan(1, 0).works[0].times_ns.tolist() == [0, 250_000_000, 250_000_000]
    back = work_from_wire(work_to_wire(w1))
    assert isinstance(back, TraceWork) and back.times_ns.tolist() == w1.times_ns.tolist()
    assert back.missing(np.array([1])) == (1, 6.0, 6.0)
    assert back.due(1_000_000_000) == 1


@pytest.mark.parametrize(
    ("scales", "message"),
    [
        ((1e308, 1.0), "rate_scale 1e+308: replays the trace's 3 s in 3e-308 s"),
        ((1.0, 1e-308), "duration_scale 1e-308: replays the trace's 3 s in 3e-308 s"),
    ],
)
def test_a_trace_scaled_to_nothing_is_refused(
    tmp_path: Path, scales: tuple[float, float], message: str
) -> None:
    # --rate-scale 1e308 once ended the run with exit 5: its mean rate was infinite.
    _jsonl(tmp_path / "t.jsonl", ROWS)
    s = _scenario(tmp_path, 'trace = "t.jsonl"\nblock_tokens = 8')
    with pytest.raises(OptionError) as e:
        s.scaled(rate_scale=scales[0], duration_scale=scales[1])
    assert str(e.value) == f"{message}; a replay lasts at least 1 ms"
    assert s.scaled(rate_scale=1000.0, duration_scale=1.0).load.duration_s == 0.003


def test_arrival_overrides_and_sweeps_are_refused(tmp_path: Path) -> None:
    _jsonl(tmp_path / "t.jsonl", ROWS)
    s = _scenario(tmp_path, 'trace = "t.jsonl"\nblock_tokens = 8')
    with pytest.raises(OptionError) as e:
        s.with_overrides(arrivals="poisson")
    assert str(e.value) == (
        "arrivals: does not apply to a trace: its rows' timestamps are its arrivals"
    )
    with pytest.raises(OptionError, match="a sweep needs an arrival-rate or vus executor"):
        s.load.at_constant_rate(5, 10, "x")
    with pytest.raises(OptionError) as e:
        s.with_overrides(dataset=str(tmp_path / "t.jsonl"))
    assert "the scenario replays a trace, whose rows are its requests: drop it" in str(e.value)


def test_a_reader_gives_rows_in_order_and_reads_again_when_asked_back(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "t.jsonl", ROWS)
    path.write_text(path.read_text().replace("\n", "\n\n", 1))  # a blank line is no row
    reader = TraceReader(str(path), "mooncake", 8)
    assert reader.row(1).hash_ids == (0, 1)
    assert reader.row(3).input_tokens == 9
    assert reader.row(0).number == 0  # back to the top


def test_a_tokens_trace_reads_jsonl_and_csv(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("output_tokens, timestamp,input_tokens\n7,0,100\n9,250.5,40\n")
    index = scan(csv, "auto", 512)
    assert index.file.format == "tokens" and index.times_ns.tolist() == [0, 250_500_000]
    assert (index.input_tokens, index.ideal_reuse) == (140, None)
    assert TraceReader(str(csv), "tokens", 512).row(1).output_tokens == 9
    js = _jsonl(tmp_path / "t.jsonl", [{"timestamp": 5, "input_tokens": 3, "output_tokens": 2}])
    assert scan(js, "auto", 512).file.format == "tokens"


BAD = [
    ("", "the file is empty; give a file with rows"),
    ("\n\n", "no rows in it; give a file with rows"),
    ('{"timestamp": 5}\n', "line 1: neither a mooncake row (timestamp, input_length, "
     "output_length, hash_ids) nor a tokens row (timestamp, input_tokens, output_tokens); "
     "give one, or set the trace's format"),
    ("[1, 2]\n", "line 1: not a JSON object; give one object a line"),
    (json.dumps(_row(0, 8, [0])) + "\n{oops\n",
     "line 2: not JSON (Expecting property name enclosed in double quotes); give one JSON "
     "object a line"),
    (json.dumps(_row(5, 8, [0])) + "\n" + json.dumps(_row(4, 8, [1])) + "\n",
     "line 2: timestamp 4 is before the row above's 5; sort the trace by timestamp"),
    (json.dumps(_row(-1, 8, [0])) + "\n",
     "line 1: timestamp = -1 must be a number of milliseconds >= 0; fix it"),
    (json.dumps(_row(0, -5, [0])) + "\n",
     "line 1: input_length = -5 must be a whole number of tokens >= 1; fix it"),
    (json.dumps(_row(0, 8, [0], out=0)) + "\n",
     "line 1: output_length = 0 must be a whole number of tokens >= 1; fix it"),
    (json.dumps(_row(0, 8, [0, "x"])) + "\n",  # type: ignore[list-item]
     'line 1: hash_ids = [0, "x"] must be a list of whole numbers >= 0; fix it'),
    (json.dumps(_row(0, 17, [0, 1])) + "\n",
     "line 1: hash_ids has 2 ids, but input_length 17 makes 3 blocks of 8 tokens; set the "
     "trace's block_tokens to the size it was made with"),
    ('{"timestamp": 0, "input_length": 8, "output_length": 2}\n',
     "line 1: no hash_ids (a mooncake row has timestamp, input_length, output_length, "
     "hash_ids); add it"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_trace_is_one_line_naming_the_file_line_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(TraceError) as e:
        scan(path, "auto", 8)
    sep = " " if message.startswith("line") else ": "
    assert str(e.value) == f"trace {path}{sep}{message}"


def test_bad_csv_traces(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("timestamp,input_tokens\n0,5\n")
    with pytest.raises(TraceError) as e:
        scan(path, "tokens", 512)
    assert str(e.value) == (
        f"trace {path} line 1: the CSV header lacks output_tokens (a tokens trace names "
        "timestamp, input_tokens, output_tokens in its first line)"
    )
    path.write_text("timestamp,input_tokens,output_tokens\n0,five,3\n")
    with pytest.raises(TraceError) as e:
        scan(path, "tokens", 512)
    assert str(e.value) == f"trace {path} line 2: input_tokens = 'five' is not a number; fix it"


@pytest.mark.parametrize(
    ("load", "req", "message"),
    [
        ('trace = "nope.jsonl"', "", 'load.trace = "nope.jsonl" names no file (from {folder}); '
         "give the trace's path"),
        ('trace = "t.jsonl"\ntime_scale = 0', "", "load.time_scale = 0 must be > 0"),
        ('trace = "t.jsonl"\nformat = "csv"', "",
         'load.format = "csv" is not one of auto, mooncake, tokens'),
        ('trace = "t.jsonl"\nformat = "tokens"\nblock_tokens = 8', "",
         'load.block_tokens applies to a mooncake trace (hash_ids); format = "tokens" has none'),
        ('trace = "t.jsonl"', "[request]\nprompt_tokens = 5",
         'request.prompt_tokens and load.executor = "trace" are exclusive; the trace\'s rows '
         "make the prompts"),
        ('trace = "t.jsonl"\nrate = 5', "",
         "load.rate is not used by executor trace (it takes trace, format, time_scale, "
         "block_tokens, duration, graceful_stop)"),
    ],
)  # fmt: skip
def test_trace_scenario_errors(tmp_path: Path, load: str, req: str, message: str) -> None:
    _jsonl(tmp_path / "t.jsonl", ROWS)
    with pytest.raises(ScenarioError) as e:
        _scenario(tmp_path, load, req)
    assert str(e.value).split(": ", 1)[1].startswith(message.format(folder=tmp_path)), str(e.value)


def test_a_line_past_16_mib_is_refused_before_the_rest_of_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    row = {"timestamp": 1, "input_length": 5, "output_length": 3, "hash_ids": [1]}
    big = json.dumps({**row, "x": "a" * (17 << 20)})
    path.write_text(json.dumps({**row, "timestamp": 0}) + "\n" + big + "\n")
    with pytest.raises(TraceError) as e:
        scan(path, "auto", 8)
    assert str(e.value) == f"trace {path} line 2: longer than 16 MiB; give one request a line"


# --------------------------------------------------------------------------- memory budget
# (#44 item 1) Each bound is checked before what it bounds is allocated; the tests lower the
# bound rather than build the big input.


def test_rows_past_the_bound_are_refused_as_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("zqbench.load.trace_file.MAX_TRACE_ROWS", 3)
    path = _jsonl(tmp_path / "t.jsonl", ROWS)
    with pytest.raises(TraceError) as e:
        scan(path, "auto", 8)
    assert str(e.value) == (
        f"trace {path} line 4: more than 3 rows; a trace holds at most 3 (its index keeps "
        "each row's time): cut the file"
    )


def test_large_hash_ids_past_the_bound_are_refused_before_they_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ids of 2^32 or more are kept one by one, about 100 bytes each: a trace of random
    # 64-bit ids grew the set without bound.
    monkeypatch.setattr("zqbench.load.trace_file.MAX_LARGE_HASH_IDS", 2)
    big = 1 << 40
    rows = [_row(0, 16, [big, big + 1]), _row(1, 16, [big, 5]), _row(2, 16, [big, big + 2])]
    path = _jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(TraceError) as e:
        scan(path, "auto", 8)
    assert str(e.value) == (
        f"trace {path} line 3: more than 2 distinct hash ids of 2^32 or more; number the ids "
        "from 0 in order of first use, as mooncake's are"
    )
    assert scan(_jsonl(tmp_path / "ok.jsonl", rows[:2]), "auto", 8).ideal_hit_tokens == 8


def test_a_hash_id_near_2_32_costs_the_pages_it_marks(tmp_path: Path) -> None:
    # The bitmap grew to the largest id as a bytearray: id 2^32 - 1 held 512 MiB (1 GiB
    # while it was copied) for one row.
    import subprocess
    import sys

    path = _jsonl(tmp_path / "t.jsonl", [_row(0, 16, [(1 << 32) - 1, 0]), _row(1, 8, [0])])
    code = (
        "import resource, sys; from pathlib import Path; from zqbench.load.trace_file import "
        "scan; before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
        f"i = scan(Path({str(path)!r}), 'auto', 8); "
        "print(i.ideal_hit_tokens, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    hits, grew_kib = map(int, out.stdout.split())
    assert hits == 8
    assert grew_kib < 32 * 1024, out.stdout


def test_times_scaled_past_any_run_stay_past_it_never_wrap() -> None:
    stamps = np.array([0.0, 1.0, 9e12])
    assert scaled_ns(stamps, 1e6).tolist() == [0, 1_000_000, 1 << 62]
    assert scaled_ns(stamps, 1e308).tolist() == [0, 1 << 62, 1 << 62]
