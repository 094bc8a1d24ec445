"""Seeded fuzzing (#25 acceptance, in part): SLO expressions, mutated scenarios and corrupted saved
runs give a result or a zqbench error (a one-line message with an exit code), never any
other exception (exit 5, a traceback).

Hypothesis runs derandomized (the same cases every run) and bounded: `CASES` examples each,
no deadline per example (a busy 2-core machine is slow, not wrong).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reporting.synth import write_synthetic_run
from zqbench.errors import ZqbenchError
from zqbench.metrics.slo import parse_slo
from zqbench.pipeline.options import RunOptions
from zqbench.pipeline.plan import make_plan
from zqbench.saved.gate import gate_run
from zqbench.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[1]
CASES = 500
FUZZ = settings(
    max_examples=CASES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# ------------------------------------------------------------------ SLO expressions
METRICS = ["latency", "ttft", "ttfb", "itl", "tpot", "errors", "status:429", "status:5xx",
           "throughput", "goodput", "gpu_density", "time_to_reject", "nope", ""]  # fmt: skip
AGGS = ["", ":p99", ":p50", ":p99.9", ":p0", ":p100", ":mean", ":rate", ":p99/p50", ":x", ":"]
OPS = ["<", "<=", ">", ">=", "=", "!", ""]
NUMBERS = st.one_of(
    st.integers(-(10**400), 10**400).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e308", "2e308", "1e-400", "nan", "inf", "-0", ".5", "5.", "1_000", ""]),
)
UNITS = st.sampled_from(["", "ms", "s", "us", "min", "h", "%", "d", "µs", " ms"])


@FUZZ
@given(
    st.one_of(
        st.builds(
            lambda m, a, o, n, u: f"{m}{a}{o}{n}{u}",
            st.sampled_from(METRICS), st.sampled_from(AGGS), st.sampled_from(OPS), NUMBERS, UNITS,
        ),
        st.text(max_size=40),
    )
)  # fmt: skip
def test_an_slo_expression_parses_or_is_a_usage_error(text: str) -> None:
    with contextlib.suppress(ZqbenchError):
        parse_slo(text)


# ------------------------------------------------------------------ mutated scenarios
BUNDLED = sorted((REPO / "scenarios").glob("*.toml"))
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1s", "0s", "-1s", "1e400s", "100000h", "10ms", "abc", "", "1.5", "∞"]),
    st.text(max_size=12),
    st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 1, 1)),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.sampled_from(["duration", "target", "rate", "name"]), st.integers(0, 9)),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a parsed TOML document, tables and list items included."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@FUZZ
@given(st.data())
def test_a_mutated_scenario_plans_or_is_a_scenario_error(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(BUNDLED))
    doc = tomllib.loads(path.read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(_paths(doc)))
        _set(doc, where, data.draw(VALUES))
    try:
        scenario = parse_scenario(
            copy.deepcopy(doc), path.name, default_name=path.stem, source=str(path)
        )
        make_plan(RunOptions.of(scenario=scenario).plan)
    except ZqbenchError:
        pass


# ------------------------------------------------------------------ corrupted saved runs
@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz") / "run"
    write_synthetic_run(folder, n=120, duration_s=3.0)
    return folder


@FUZZ
@given(
    st.sampled_from(["summary.json", "samples.parquet"]),
    st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=4),
    st.one_of(st.none(), st.floats(0, 1)),
)
def test_a_corrupted_saved_run_gates_or_is_a_usage_error(
    saved: Path, tmp_path_factory: pytest.TempPathFactory, name: str, flips: list, cut: Any
) -> None:
    run = tmp_path_factory.mktemp("case") / "run"
    shutil.copytree(saved, run)
    data = bytearray((run / name).read_bytes())
    for at, byte in flips:
        data[min(int(at * len(data)), len(data) - 1)] = byte
    if cut is not None:
        data = data[: int(cut * len(data))]
    (run / name).write_bytes(bytes(data))
    try:
        summary = gate_run(run)
    except ZqbenchError:
        return
    json.loads(summary.to_json())  # what it writes is JSON
