"""Samples reach disk as they complete, so a crash or `kill -9` loses at most the last flush.

Each worker appends record batches to its own Arrow IPC stream (`samples.w<N>.arrows`),
flushed at least every `flush_interval_s`. A Parquet file has its footer at the end and
is unreadable until closed, so Parquet is written once at the end (`finalize`), by
merging the streams. `read_stream` recovers every complete batch of a stream that was
cut off mid-write, which is what `zqbench report` uses after a crash.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from zqbench.errors import UsageError
from zqbench.safe_files import open_new, write_via
from zqbench.samples.sample import ARROW_SCHEMA, Sample

STREAM_GLOB = "samples.w*.arrows"
# A flush starts once this many rows wait, whatever the interval: each of its steps (a column)
# then holds the loop ~0.1 ms, and its last (the batch written) ~0.4 ms. At 10,000 req/s a
# 0.5 s flush of 5,000 rows held it 0.3-1.2 ms a step and 2-3 ms at the last, and the sends
# due meanwhile went late in clumps every 0.5 s: the schedule lag's p99 (#45).
FLUSH_ROWS = 1024
PARQUET_NAME = "samples.parquet"


def stream_path(out_dir: Path, worker: int) -> Path:
    return out_dir / f"samples.w{worker}.arrows"


class SampleRecorder:
    """Buffers samples briefly and appends them to an Arrow stream.

    `add` is cheap (a list append); `maybe_flush` converts the buffer column by
    column (C-speed) and writes it. The engine calls `maybe_flush` from its event
    loop at a steady cadence.
    """

    def __init__(
        self,
        path: Path,
        *,
        flush_interval_s: float = 0.5,
        on_batch: Callable[[pa.RecordBatch], None] | None = None,
    ) -> None:
        self.path = path
        self.flush_interval_s = flush_interval_s
        self.on_batch = on_batch  # each batch once on disk (a distributed worker ships it)
        self._rows: list[tuple[object, ...]] = []
        self._file = open_new(path)  # never through a link; closed in close()
        self._writer = ipc.new_stream(self._file, ARROW_SCHEMA)
        self._last_flush = time.monotonic()
        self.written = 0
        # pyarrow initialises its conversion and IPC machinery lazily, taking ~0.3 s on the
        # first batch. Pay that here, before the schedule starts, not mid-run in the loop.
        empty = [pa.array([], type=f.type) for f in ARROW_SCHEMA]
        self._writer.write_batch(pa.RecordBatch.from_arrays(empty, schema=ARROW_SCHEMA))

    def add(self, sample: Sample) -> None:
        self._rows.append(sample)  # a tuple in the schema's order

    def due(self) -> bool:
        return (
            len(self._rows) >= FLUSH_ROWS
            or time.monotonic() - self._last_flush >= self.flush_interval_s
        )

    def maybe_flush(self) -> None:
        if self.due():
            self.flush()

    def flush(self) -> None:
        for _ in self.flush_steps():
            pass

    def flush_steps(self) -> Generator[None, None, None]:
        """The buffer's flush, a column at a time: the engine's loop takes a turn at each
        yield. Converted whole, 1,500 rows held the loop 3-8 ms at 3,000 req/s, and each
        send due meanwhile went late (the schedule lag's p99, #45); a column is 0.1-0.2 ms.
        Closed before its end, the rows it took go back to the buffer, so `close` writes
        them: no row is lost to a cancelled flush."""
        self._last_flush = time.monotonic()
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        done = False
        try:
            arrays = []
            for i, field in enumerate(ARROW_SCHEMA):
                arrays.append(pa.array([row[i] for row in rows], type=field.type))
                yield
            batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
            self._writer.write_batch(batch)
            done = True
        finally:
            if not done:
                self._rows[:0] = rows
        self._file.flush()  # into the kernel: survives the process being killed
        self.written += len(rows)
        if self.on_batch is not None:
            self.on_batch(batch)

    def close(self) -> None:
        if self._file.closed:
            return
        self.flush()
        self._writer.close()
        self._file.close()


def read_stream(path: Path) -> pa.Table:
    """Every complete record batch of a stream, even one whose writer was killed."""
    batches: list[pa.RecordBatch] = []
    with open(path, "rb") as f:
        try:
            reader = ipc.open_stream(f)
        except pa.ArrowInvalid:
            return ARROW_SCHEMA.empty_table()
        while True:
            try:
                batches.append(reader.read_next_batch())
            except (StopIteration, pa.ArrowInvalid, OSError):
                break  # the end, or a batch cut off mid-write: everything before it is intact
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


SORT_KEYS = [("t_send", "ascending"), ("request_id", "ascending")]
# Rows written (and, adding columns, read) at a time: a Parquet row group. The samples are
# never held twice whole: sorted whole, the merge took a second copy of the table, and its
# Python file reads a third (730 bytes a row in all at 2,000,000 rows, #44).
ROW_GROUP = 65_536


def _concat(paths: Iterable[Path]) -> pa.Table:
    tables = [read_stream(p) for p in sorted(paths)]
    return pa.concat_tables(tables) if tables else ARROW_SCHEMA.empty_table()


def merge_streams(paths: Iterable[Path]) -> pa.Table:
    # One order for everyone downstream: by send time, then id.
    return _concat(paths).sort_by(SORT_KEYS)


def _write_groups(target: Path, schema: pa.Schema, groups: Iterable[pa.Table]) -> None:
    """samples.parquet written a row group at a time (none: a file of its schema alone)."""

    def write(tmp: Path) -> None:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as out:
            for group in groups:
                out.write_table(group)

    write_via(target, write)


def finalize(
    out_dir: Path, metadata: dict[str, str], streams: Iterable[Path] | None = None
) -> Path:
    """Merge the workers' streams (default: every one in `out_dir`) into samples.parquet,
    with the run's clock in its metadata. A stream never created (a worker that never
    started) is skipped.

    The streams are removed only after the Parquet file is complete and renamed into place."""
    found = out_dir.glob(STREAM_GLOB) if streams is None else streams
    streams = sorted(p for p in found if p.is_file())
    table = _concat(streams)
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata(
        {**existing, **{k.encode(): v.encode() for k, v in metadata.items()}}
    )
    # By send time, then id, a row group at a time through the order's indices (8 bytes a
    # row) rather than a sorted copy of the whole table.
    order = pc.sort_indices(table, sort_keys=SORT_KEYS)
    groups = (table.take(order[a : a + ROW_GROUP]) for a in range(0, len(order), ROW_GROUP))
    target = out_dir / PARQUET_NAME
    _write_groups(target, table.schema, groups)
    for s in streams:
        s.unlink()
    return target


def add_columns(out_dir: Path, columns: Mapping[str, np.ndarray]) -> None:
    """Write samples.parquet again with analysis columns added, one value per row in its
    order, the metadata kept: analysis adds what it derived (each request's outcome) beside
    what the engine recorded. The file is read back, and each column converted, a row group
    at a time: converted whole, the outcome columns were 50 bytes a row more (#44)."""
    target = out_dir / PARQUET_NAME
    types = [_arrow_type(values) for values in columns.values()]

    def write(tmp: Path) -> None:
        with pq.ParquetFile(target) as source:  # closed before tmp replaces it
            schema = source.schema_arrow
            for name, kind in zip(columns, types, strict=True):
                schema = schema.append(pa.field(name, kind))
            with pq.ParquetWriter(tmp, schema, compression="zstd") as out:
                a = 0
                for batch in source.iter_batches(batch_size=ROW_GROUP):
                    b = a + batch.num_rows
                    added = [
                        pa.array(values[a:b], type=kind, from_pandas=True)
                        for values, kind in zip(columns.values(), types, strict=True)
                    ]
                    out.write_table(pa.Table.from_arrays([*batch.columns, *added], schema=schema))
                    a = b
                    # What pyarrow's allocator kept of the group, given back before the next
                    pa.default_memory_pool().release_unused()

    write_via(target, write)


def _arrow_type(values: np.ndarray) -> pa.DataType:
    """The column type pyarrow gives `values` whole: a slice of them may be all null."""
    if values.dtype != object:
        return pa.from_numpy_dtype(values.dtype)
    missing = pd.isna(values)
    first = int(np.argmin(missing))  # the first value there is (0 when there is none)
    return pa.null() if missing.all() else pa.array(values[first : first + 1]).type


def load_samples(out_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """The run's samples: the Parquet file, or the raw streams of a run that never finished.
    A file that is not a run's samples (cut, damaged, another table, a link) is a
    UsageError naming it and what is wrong, before anything reads a column of it."""
    parquet = sample_file(out_dir)
    if parquet is not None:
        with unreadable(parquet):
            table = pq.read_table(parquet, columns=None if columns is None else list(columns))
            check_samples(table, parquet, columns)  # a damaged name fails here (ValueError)
        return table
    merged = merge_streams(out_dir.glob(STREAM_GLOB))
    return merged if columns is None else merged.select(list(columns))


def sample_file(out_dir: Path) -> Path | None:
    """The run's samples.parquet; None when it has none (only streams, or nothing).
    UsageError when it is a link."""
    parquet = out_dir / PARQUET_NAME
    if parquet.is_symlink():
        raise UsageError(f"{parquet}: a symbolic link; a run's samples are a plain file")
    return parquet if parquet.exists() else None


@contextlib.contextmanager
def unreadable(parquet: Path) -> Iterator[None]:
    """Whatever pyarrow says of a file that is not readable Parquet: one UsageError line."""
    try:
        yield
    except (OSError, pa.ArrowException, ValueError) as exc:
        said = str(exc).replace(f"Could not open Parquet input source '{parquet}': ", "")
        reason = said.splitlines()[0][:160] if said else type(exc).__name__
        raise UsageError(f"{parquet}: not a readable Parquet file ({reason})") from None


def checked_file(out_dir: Path) -> Path | None:
    """samples.parquet checked as load_samples checks it, reading one column at a time
    (the analysis then reads it so, zqbench.samples.columns); None when the run has none."""
    parquet = sample_file(out_dir)
    if parquet is None:
        return None
    with unreadable(parquet):
        schema = pq.read_schema(parquet)

        def nulls(name: str) -> int:
            return int(pq.read_table(parquet, columns=[name]).column(0).null_count)

        check_schema(schema, nulls, parquet)
    return parquet


def check_samples(table: pa.Table, path: Path, columns: Sequence[str] | None = None) -> None:
    """UsageError unless `table` has every column a run always records (the schema's
    non-nullable ones; a nullable column may be absent: a run saved before it existed), each
    column of its type, and no empty value where a run always records one."""
    check_schema(table.schema, lambda name: table.column(name).null_count, path, columns)


def check_schema(
    schema: pa.Schema,
    nulls: Callable[[str], int],
    path: Path,
    columns: Sequence[str] | None = None,
) -> None:
    """check_samples on a schema and its columns' null counts (`nulls(name)`)."""
    names = set(schema.names)
    fields = [f for f in ARROW_SCHEMA if columns is None or f.name in columns]
    missing = [f.name for f in fields if f.name not in names and not f.nullable]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UsageError(f"{path}: not a run's samples (no column {missing[0]}{more})")
    for f in fields:
        if f.name not in names:
            continue
        found = schema.field(f.name).type
        if found != f.type:
            raise UsageError(f"{path}: column {f.name} is {found}, a run's samples have {f.type}")
        count = nulls(f.name) if not f.nullable else 0
        if count:
            raise UsageError(
                f"{path}: column {f.name} has {count} empty (null) values; a run records one"
                " for every request"
            )
