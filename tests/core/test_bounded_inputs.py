"""#44 items 1, 5 and 6: one value in a trace or a dataset never ends a run with exit 5, nor
allocates past the memory budget; each is exit 2, one line naming the value and the bound,
through the CLI, before the target is contacted (no --target is reachable at port 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.conftest import write_scenario, zqbench_here
from tests.servers import ProgrammedServer

DEAD = "http://127.0.0.1:9"  # nothing listens: a run that got past its checks would exit 3


def _trace(folder: Path, rows: list[dict[str, object]], load: str = "") -> Path:
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    body = f'[load]\nexecutor = "trace"\ntrace = "t.jsonl"\n{load}\n[request]\nstream = true\n'
    return write_scenario(folder, body)


def _tokens(ts: float, n: int = 10, out: int = 2) -> dict[str, object]:
    return {"timestamp": ts, "input_tokens": n, "output_tokens": out}


def _run(scenario: Path, *extra: str) -> tuple[int, str]:
    result = zqbench_here("run", str(scenario), "--target", DEAD, "--api", "openai", *extra)
    return result.returncode, result.stderr.strip()


@pytest.mark.parametrize("scale", ["1e-308", "1e-12"])
def test_a_time_scale_in_the_file_that_replays_the_trace_in_nothing_is_exit_2(
    tmp_path: Path, scale: str
) -> None:
    # time_scale = 1e-308 was exit 5 (an infinite mean rate in summary.json); 1e-12 sent the
    # whole trace at once and ended invalid (exit 4). --rate-scale was refused already.
    path = _trace(tmp_path, [_tokens(0), _tokens(3000)], f"time_scale = {scale}")
    code, err = _run(path)
    assert code == 2
    assert err == (
        f"zqbench: error: {path}: load.time_scale = {float(scale):g} replays the trace's 3 s "
        f"in {3 * float(scale):.3g} s; a replay lasts at least 1 ms"
    )


def test_a_trace_spanning_past_int64_nanoseconds_is_exit_2(tmp_path: Path) -> None:
    # 1e15 ms after the first row: its time in ns wrapped negative, the run was taken for
    # 0.07 s long, and the plots failed (exit 5).
    path = _trace(tmp_path, [_tokens(0), _tokens(1e15)])
    code, err = _run(path)
    assert (code, err) == (
        2,
        f"zqbench: error: trace {tmp_path / 't.jsonl'} line 2: timestamp 1e+15 is 1e+15 ms "
        "after the first row's; a trace spans at most 1e+12 ms (31 years); fix it",
    )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        # 1e9 prompt tokens: the worker built a 1 GB prompt (1.4 GB RSS under a 3 GB limit,
        # then the request was lost); past any context, it is refused before any traffic.
        (
            _tokens(0, n=10_000_001),
            "input_tokens = 10000001 is more than 10,000,000 tokens, past any model's "
            "context; fix it",
        ),
        (
            _tokens(0, out=1_000_001),
            "output_tokens = 1000001 is more than 1,000,000 tokens, longer than any model "
            "answers; fix it",
        ),
    ],
)
def test_a_trace_row_past_any_context_is_exit_2_before_traffic(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    path = _trace(tmp_path, [row])
    code, err = _run(path)
    assert (code, err) == (2, f"zqbench: error: trace {tmp_path / 't.jsonl'} line 1: {message}")


def test_a_block_past_any_context_is_exit_2(tmp_path: Path) -> None:
    row = {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]}
    path = _trace(tmp_path, [row], "block_tokens = 10000001")
    code, err = _run(path)
    assert (code, err) == (
        2,
        f"zqbench: error: {path}: load.block_tokens = 10000001 must be at most 10,000,000 "
        "(past any model's context)",
    )


def test_a_sharegpt_answer_with_a_lone_surrogate_is_measured_not_exit_5(tmp_path: Path) -> None:
    # Only the answer's length is used; measuring it raised UnicodeEncodeError (exit 5).
    from zqbench.sources.dataset_rows import scan

    conv = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": ""}]}
    line = json.dumps(conv).replace('"value": ""}]', '"value": "ab\\udc00"}]')
    (tmp_path / "d.jsonl").write_text(line + "\n")
    assert scan(tmp_path / "d.jsonl", "auto").answer_bytes.tolist() == [5]
    path = write_scenario(
        tmp_path,
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 1\nduration = "1s"\n'
        '[request]\ndataset = "d.jsonl"\n',
    )
    code, err = _run(path)
    assert code == 3, err  # past its checks: only the dead target stops it


# --- the requests a run plans (#44 item 1): each is a row its analysis holds in memory -----
TOO_MANY = "a run plans at most 3,600,000 (its analysis holds every request's row in memory): "
LOWER = (
    "lower the rate or the duration (or --rate-scale, --duration-scale), or split the load "
    "into several runs"
)


@pytest.mark.parametrize(
    ("load", "extra", "asked"),
    [
        # Ten thousand a second for six minutes is the most; a hair more is refused.
        ('executor = "constant-arrival-rate"\nrate = 10000.003\nduration = "360s"', (),
         "3,600,002 requests (rate x duration)"),
        ('executor = "constant-arrival-rate"\nrate = 1000\nduration = "1h"',
         ("--duration-scale", "1.5"), "5,400,000 requests (rate x duration)"),
        ('executor = "sessions"\nrate = 100\nturns = 4\nduration = "10000s"\n'
         '[request]\ntimeout = "5s"\nmax_tokens = 8\nprompt_tokens = 8', (),
         "4,000,000 requests (rate x duration x turns)"),
    ],
)  # fmt: skip
def test_a_load_past_the_planned_requests_is_exit_2_and_reaches_no_server(
    tmp_path: Path, load: str, extra: tuple[str, ...], asked: str
) -> None:
    path = write_scenario(tmp_path, f"[load]\n{load}\n")
    with ProgrammedServer() as server:
        result = zqbench_here("run", str(path), "--target", server.url, "--api", "openai", *extra)
        reached = server.all_truth()["requests"]
    assert (result.returncode, result.stderr.strip(), reached) == (
        2,
        f"zqbench: error: the load asks for {asked}; {TOO_MANY}{LOWER}",
        0,
    )


def test_a_trace_replaying_past_the_planned_requests_is_exit_2_and_reaches_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound lowered rather than a 3,600,001-row trace built: four rows past a bound of 3.
    monkeypatch.setattr("zqbench.load.trace.MAX_PLANNED_REQUESTS", 3)
    path = _trace(tmp_path, [_tokens(t) for t in (0, 10, 20, 30)])
    with ProgrammedServer() as server:
        result = zqbench_here("run", str(path), "--target", server.url, "--api", "openai")
        reached = server.all_truth()["requests"]
    assert (result.returncode, result.stderr.strip(), reached) == (
        2,
        "zqbench: error: the load asks for 4 requests (the trace's rows replayed); a run plans "
        "at most 3 (its analysis holds every request's row in memory): replay a part of it "
        "([load] duration, or --duration-scale), or split the trace into several runs",
        0,
    )
    cut = _trace(tmp_path, [_tokens(t) for t in (0, 10, 20, 30)], 'duration = "25ms"')
    with ProgrammedServer() as server:  # the first three rows are replayed: under the bound
        result = zqbench_here("run", str(cut), "--target", server.url, "--api", "openai")
        assert server.all_truth()["requests"] > 0, result.stderr
