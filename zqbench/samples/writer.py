"""Samples reach disk as they complete, so a crash or `kill -9` loses at most the last flush.

Each worker appends record batches to its own Arrow IPC stream (`samples.w<N>.arrows`),
flushed at least every `flush_interval_s`. A Parquet file has its footer at the end and
is unreadable until closed, so Parquet is written once at the end (`finalize`), by
merging the streams. `read_stream` recovers every complete batch of a stream that was
cut off mid-write, which is what `zqbench report` uses after a crash.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from zqbench.errors import UsageError
from zqbench.safe_files import open_new, write_via
from zqbench.samples.sample import ARROW_SCHEMA, SAMPLE_FIELDS, Sample

STREAM_GLOB = "samples.w*.arrows"
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
        self._rows.append(tuple(getattr(sample, name) for name in SAMPLE_FIELDS))

    def maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        columns = list(zip(*rows, strict=False))
        arrays = [
            pa.array(column, type=field.type)
            for column, field in zip(columns, ARROW_SCHEMA, strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
        self._writer.write_batch(batch)
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


def merge_streams(paths: Iterable[Path]) -> pa.Table:
    tables = [read_stream(p) for p in sorted(paths)]
    if not tables:
        return ARROW_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    # One order for everyone downstream: by send time, then id.
    return table.sort_by([("t_send", "ascending"), ("request_id", "ascending")])


def finalize(
    out_dir: Path, metadata: dict[str, str], streams: Iterable[Path] | None = None
) -> Path:
    """Merge the workers' streams (default: every one in `out_dir`) into samples.parquet,
    with the run's clock in its metadata. A stream never created (a worker that never
    started) is skipped.

    The streams are removed only after the Parquet file is complete and renamed into place."""
    found = out_dir.glob(STREAM_GLOB) if streams is None else streams
    streams = sorted(p for p in found if p.is_file())
    table = merge_streams(streams)
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata(
        {**existing, **{k.encode(): v.encode() for k, v in metadata.items()}}
    )
    target = out_dir / PARQUET_NAME
    write_via(target, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    for s in streams:
        s.unlink()
    return target


def add_columns(out_dir: Path, table: pa.Table, columns: Mapping[str, np.ndarray]) -> None:
    """Write samples.parquet again as `table` (the file as finalize wrote it, already read)
    plus analysis columns, one value per row in its order, the metadata kept. Analysis adds
    what it derived (each request's outcome) beside what the engine recorded."""
    for name, values in columns.items():
        table = table.append_column(name, pa.array(values, from_pandas=True))
    target = out_dir / PARQUET_NAME
    write_via(target, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def load_samples(out_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """The run's samples: the Parquet file, or the raw streams of a run that never finished.
    A file that is not a run's samples (cut, damaged, another table, a link) is a
    UsageError naming it and what is wrong, before anything reads a column of it."""
    parquet = out_dir / PARQUET_NAME
    if parquet.is_symlink():
        raise UsageError(f"{parquet}: a symbolic link; a run's samples are a plain file")
    if parquet.exists():
        try:
            table = pq.read_table(parquet, columns=None if columns is None else list(columns))
            check_samples(table, parquet, columns)  # a damaged name fails here (ValueError)
        except (OSError, pa.ArrowException, ValueError) as exc:
            said = str(exc).replace(f"Could not open Parquet input source '{parquet}': ", "")
            reason = said.splitlines()[0][:160] if said else type(exc).__name__
            raise UsageError(f"{parquet}: not a readable Parquet file ({reason})") from None
        return table
    merged = merge_streams(out_dir.glob(STREAM_GLOB))
    return merged if columns is None else merged.select(list(columns))


def check_samples(table: pa.Table, path: Path, columns: Sequence[str] | None = None) -> None:
    """UsageError unless `table` has every column a run always records (the schema's
    non-nullable ones; a nullable column may be absent: a run saved before it existed), each
    column of its type, and no empty value where a run always records one."""
    names = set(table.schema.names)
    fields = [f for f in ARROW_SCHEMA if columns is None or f.name in columns]
    missing = [f.name for f in fields if f.name not in names and not f.nullable]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise UsageError(f"{path}: not a run's samples (no column {missing[0]}{more})")
    for f in fields:
        if f.name not in names:
            continue
        found = table.schema.field(f.name).type
        if found != f.type:
            raise UsageError(f"{path}: column {f.name} is {found}, a run's samples have {f.type}")
        nulls = table.column(f.name).null_count
        if nulls and not f.nullable:
            raise UsageError(
                f"{path}: column {f.name} has {nulls} empty (null) values; a run records one"
                " for every request"
            )
