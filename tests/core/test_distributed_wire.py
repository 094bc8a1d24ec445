"""The pieces of --distributed that need no network: the clock estimate and the wire."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from zqbench.dialects.base import DialectConfig
from zqbench.distributed import protocol as p
from zqbench.distributed.clock import ClockRound, best_offset
from zqbench.engines.live import LiveStats, WorkerLine, merge_snapshots
from zqbench.engines.native import WorkerSpec
from zqbench.load import work_from_wire, work_to_wire
from zqbench.load.arrival_rate import ArrivalWork
from zqbench.load.vu_schedule import VuPlan
from zqbench.load.vus import VuWork
from zqbench.samples.sample import ARROW_SCHEMA, SAMPLE_FIELDS, Sample
from zqbench.samples.writer import SampleRecorder, read_stream
from zqbench.sources.synthetic import ClassSpec, SyntheticSource
from zqbench.transport.base import PoolLimits


def test_the_minimum_rtt_round_wins_and_bounds_the_offset() -> None:
    # Worker clock = master clock - 1000 ns. A slow return path skews a round's estimate.
    rounds = [
        ClockRound(t1=0, t2=1_000 + 50, t3=1_000 + 60, t4=10_000),  # rtt 9 990, skewed
        ClockRound(t1=100, t2=1_100 + 20, t3=1_100 + 25, t4=150),  # rtt 45
    ]
    best = best_offset(rounds)
    assert best.rtt_ns == 45 and best.rounds == 2
    assert abs(best.offset_ns - 1_000) <= best.uncertainty_ns
    assert best.to_worker(5_000) == 5_000 - best.offset_ns
    with pytest.raises(ValueError):
        best_offset([])


def test_spec_and_work_cross_the_wire_without_the_api_key() -> None:
    spec = WorkerSpec(
        worker=1, n_workers=2, base_url="http://127.0.0.1:1", http2=False,
        limits=PoolLimits(max_connections=8, warm_connections=2), api="anthropic",
        dialect_config=DialectConfig("m", api_key="secret", extra_headers=(("x-a", "b"),)),
        source=SyntheticSource(
            (ClassSpec("default", "hello", 8, 4), ClassSpec("long", "hello " * 9, 9, 20, 0.5)),
            stream=True, seed=3, stage_mixes=(None, ("long",)),
        ),
        timeout_s=5.0,
        out_dir="/master/run",
    )  # fmt: skip
    wire = p.spec_to_wire(spec)
    assert "secret" not in repr(wire)
    back = p.spec_from_wire(wire, api_key="mine", out_dir="/worker/run")
    mine = dataclasses.replace(spec.dialect_config, api_key="mine")
    assert back == dataclasses.replace(spec, out_dir="/worker/run", dialect_config=mine)

    work = ArrivalWork(
        request_ids=np.array([1, 3, 5], np.int64),
        times_ns=np.array([10, 20, 30], np.int64),
        stages=np.array([0, 0, 1], np.int32),
    )
    back_work = work_from_wire(work_to_wire(work))
    assert isinstance(back_work, ArrivalWork)
    assert back_work.request_ids.tolist() == [1, 3, 5] and back_work.stages.tolist() == [0, 0, 1]
    assert back_work.times_ns.tolist() == [10, 20, 30]

    plan = VuPlan((0, 10), (2,), (4,), 0)
    closed = VuWork(plan, worker=1, n_workers=2)
    assert work_from_wire(work_to_wire(closed)) == closed


def test_an_unknown_work_or_source_on_the_wire_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown work 'replay-v9'"):
        work_from_wire({"work": "replay-v9"})
    from zqbench.sources import source_from_wire

    with pytest.raises(ValueError, match="unknown request source 'podcasts'"):
        source_from_wire({"source": "podcasts"})


def test_a_flushed_batch_is_shipped_as_written(tmp_path: Path) -> None:
    shipped: list[pa.RecordBatch] = []
    recorder = SampleRecorder(tmp_path / "s.arrows", on_batch=shipped.append)
    row = {name: None for name in SAMPLE_FIELDS}
    row.update(
        request_id=7,
        worker=1,
        stage=0,
        request_class="default",
        t_send=5,
        t_end=9,
        status=200,
        tokens_from_usage=False,
        n_chunks=1,
        http_version="1.1",
        bytes_in=3,
    )
    recorder.add(Sample(**row))
    recorder.close()
    assert [b.num_rows for b in shipped] == [1]
    table = p.batch_from_bytes(p.batch_to_bytes(shipped[0]))
    assert table.to_pylist() == read_stream(tmp_path / "s.arrows").to_pylist()
    assert table.column("request_id").to_pylist() == [7]


def test_addresses() -> None:
    assert p.parse_address("10.0.0.1", default_host="*") == ("10.0.0.1", 5557)
    assert p.parse_address(":6000", default_host="*") == ("*", 6000)
    with pytest.raises(ValueError):
        p.parse_address("host:port", default_host="*")


def test_a_workers_progress_crosses_the_wire_with_its_index_and_lag() -> None:
    # The master's live view shows each worker apart: its index and lag must arrive.
    stats = LiveStats(worker=1, sent=7, due=8, inflight=1)
    for lag in (0.1, 0.2, 3.5):
        stats.record_lag(lag)
    stats.record("200", True, 12.0)
    snap = stats.snapshot()
    assert p.progress_from_wire(p.progress_to_wire(snap)) == snap
    merged = merge_snapshots([p.progress_from_wire(p.progress_to_wire(snap))])
    assert merged.per_worker == (WorkerLine(worker=1, sent=7, due=8, inflight=1, lag_p99_ms=3.5),)


@pytest.mark.parametrize("run", ["../../escaped", "..", "a/b", "/tmp/abs", "", 7])
def test_a_worker_refuses_a_run_name_that_would_write_outside_its_folder(
    tmp_path: Path, run: object
) -> None:
    """#25 item 4: an assignment whose run is `../../x` made the worker write its samples
    there. Now it answers zq_failed, exits 2 and creates nothing outside --out."""
    from zqbench.distributed.worker import _Session
    from zqbench.engines.workers import StopFlag
    from zqbench.errors import EXIT_USAGE

    out = tmp_path / "a" / "b" / "workers"
    out.mkdir(parents=True)
    session = object.__new__(_Session)
    sent: list[tuple[str, object]] = []
    notes: list[str] = []
    session.out, session.stop, session.note = out, StopFlag(), notes.append
    session.address = "127.0.0.1:5557"
    session._send = lambda kind, data=None: sent.append((kind, data))  # type: ignore[method-assign]
    assert session._run({"index": 0, "run": run, "spec": {}, "work": {}}) == EXIT_USAGE
    assert sent == [(p.FAILED, {"message": f"refused run name {run!r}: not a folder name"})]
    assert sorted(str(x.relative_to(tmp_path)) for x in tmp_path.rglob("*")) == [
        "a",
        "a/b",
        "a/b/workers",
    ]


def test_a_batch_with_nulls_where_the_schema_allows_none_is_refused() -> None:
    # A peer holding the secret sent null request ids: they read as NaN and the master died
    # with IndexError (#44 item 5); a refused batch is dropped as malformed content.
    columns = [
        pa.nulls(3, f.type)
        if f.nullable or f.name == "request_id"
        else pa.array([1] * 3).cast(f.type)
        if not pa.types.is_string(f.type)
        else pa.array(["x"] * 3, f.type)
        for f in ARROW_SCHEMA
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    with pytest.raises(ValueError) as e:
        p.batch_from_bytes(p.batch_to_bytes(batch))
    assert str(e.value) == "a sample batch with nulls in request_id"
