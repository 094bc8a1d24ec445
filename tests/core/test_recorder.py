"""Samples reach disk as they complete; a killed writer loses at most the last flush."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.polling import wait_for
from zqbench.samples import writer as recorder
from zqbench.samples.sample import SAMPLE_FIELDS, Sample


def _sample(i: int) -> Sample:
    return Sample(
        request_id=i,
        worker=0,
        stage=0,
        request_class="default",
        t_intended=i * 1000,
        t_send=i * 1000 + 5,
        t_headers=i * 1000 + 50,
        t_first_token=i * 1000 + 60,
        t_last_token=i * 1000 + 850,
        t_end=i * 1000 + 900,
        status=200,
        error=None,
        prompt_tokens=32,
        output_tokens=16,
        tokens_from_usage=True,
        itl_mean_ns=50,
        itl_p99_ns=70,
        itl_max_ns=80,
        n_chunks=16,
        srv_received=1764400000.000001,
        srv_dispatch=1764400000.000002,
        srv_start=1764400000.000003,
        srv_gpu_ms=None,
        http_version="1.1",
        bytes_in=1234,
        retry_after_s=None,
    )


def test_round_trip_through_stream_and_parquet(tmp_path: Path) -> None:
    rec = recorder.SampleRecorder(recorder.stream_path(tmp_path, 0), flush_interval_s=0)
    for i in range(10):
        rec.add(_sample(i))
        rec.maybe_flush()
    rec.close()
    path = recorder.finalize(tmp_path, {"zqbench.clock.start_epoch_ns": "42"})
    table = pq.read_table(path)
    assert table.num_rows == 10
    assert tuple(table.schema.names) == SAMPLE_FIELDS
    assert table.schema.metadata[b"zqbench.clock.start_epoch_ns"] == b"42"
    rows = table.to_pylist()
    assert rows[3]["t_send"] == 3005
    assert rows[3]["srv_received"] == 1764400000.000001
    assert rows[3]["t_headers"] == 3050
    assert not list(tmp_path.glob(recorder.STREAM_GLOB)), "streams are removed after finalize"


def test_truncated_stream_keeps_every_complete_batch(tmp_path: Path) -> None:
    path = recorder.stream_path(tmp_path, 0)
    rec = recorder.SampleRecorder(path, flush_interval_s=0)
    for i in range(5):
        rec.add(_sample(i))
        rec.flush()
    rec._file.flush()
    size = path.stat().st_size
    rec.add(_sample(99))
    rec.flush()
    rec._file.close()  # no end-of-stream marker, as after kill -9
    with open(path, "r+b") as f:  # and cut the last batch in half
        f.truncate(size + (path.stat().st_size - size) // 2)
    table = recorder.load_samples(tmp_path)
    assert table.column("request_id").to_pylist() == [0, 1, 2, 3, 4]


def test_kill_9_loses_at_most_the_last_flush_interval(tmp_path: Path) -> None:
    """A writer process killed with SIGKILL: everything flushed before the kill is readable."""
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from pathlib import Path
        from zqbench.samples import writer as recorder
        from test_recorder import _sample
        rec = recorder.SampleRecorder(recorder.stream_path(Path({str(tmp_path)!r}), 0),
                                      flush_interval_s=0.2)
        i = 0
        while True:
            rec.add(_sample(i)); rec.maybe_flush(); i += 1
            if i % 100 == 0:
                print(i, flush=True)
            time.sleep(0.001)
        """
    )

    def on_disk() -> int:
        return len(recorder.load_samples(tmp_path))

    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        last = 0
        deadline = time.monotonic() + 20
        while last < 1000 and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if line:
                last = int(line)
        # Killed once a flush after `last` reached the disk (polled: a busy machine may take
        # longer than the 0.2 s interval), mid-way through whatever it writes next.
        wait_for(lambda: on_disk() >= last, f"the {last} samples produced so far on disk")
        flushed = on_disk()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
    table = recorder.load_samples(tmp_path)
    ids = table.column("request_id").to_pylist()
    assert ids == list(range(len(ids))), "no gaps: batches are whole"
    assert len(ids) >= flushed >= last, f"{len(ids)} samples after the kill, {flushed} before"


def test_a_flush_cut_between_columns_loses_no_row(tmp_path: Path) -> None:
    """The engine flushes a column at a time, its loop taking a turn between two (#45): a
    flush closed part way (the run's housekeeping cancelled) hands its rows back, and rows
    added meanwhile stay too; close() writes them all, once each."""
    rec = recorder.SampleRecorder(recorder.stream_path(tmp_path, 0), flush_interval_s=0)
    for i in range(3):
        rec.add(_sample(i))
    steps = rec.flush_steps()
    next(steps)
    next(steps)
    rec.add(_sample(3))  # a send that ended while the flush was part way
    steps.close()
    assert rec.written == 0
    rec.close()
    table = recorder.load_samples(tmp_path)
    assert sorted(table.column("request_id").to_pylist()) == [0, 1, 2, 3]


def test_a_stepped_flush_yields_once_a_column(tmp_path: Path) -> None:
    rec = recorder.SampleRecorder(recorder.stream_path(tmp_path, 0), flush_interval_s=0)
    rec.add(_sample(7))
    assert sum(1 for _ in rec.flush_steps()) == len(SAMPLE_FIELDS)
    assert rec.written == 1
    assert sum(1 for _ in rec.flush_steps()) == 0  # nothing buffered: nothing to convert
    rec.close()


def test_a_full_buffer_is_due_before_its_interval(tmp_path: Path) -> None:
    """At 10,000 req/s a 0.5 s buffer is 5,000 rows, whose flush held the loop 2-3 ms and
    made the schedule lag's p99 (#45): a flush is due at FLUSH_ROWS rows, interval or not."""
    rec = recorder.SampleRecorder(recorder.stream_path(tmp_path, 0), flush_interval_s=3600)
    for i in range(recorder.FLUSH_ROWS - 1):
        rec.add(_sample(i))
    assert not rec.due()
    rec.add(_sample(recorder.FLUSH_ROWS))
    assert rec.due()
    rec.maybe_flush()
    assert rec.written == recorder.FLUSH_ROWS and not rec.due()
    rec.close()
