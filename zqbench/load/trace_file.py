"""Reading a trace file without holding it: the index pass, then the rows in order.

    mooncake   JSONL, one request a line: `timestamp` (ms), `input_length` and
               `output_length` (tokens), `hash_ids` (one id per block of `block_tokens`
               prompt tokens; requests whose leading ids agree share that prefix)
    tokens     JSONL with `timestamp` (ms), `input_tokens`, `output_tokens`, or a CSV file
               with a header naming those three columns: no shared prefixes

The index pass (`scan`) reads the file once: it hashes it (sha256), checks every row (a bad
one is exit 2 naming its line and field), and keeps only each row's timestamp (8 bytes a
row) and a few totals, among them the trace's ideal reuse: the share of prompt tokens an
unbounded prefix cache would find, from the hash ids. A worker then reads the rows it sends
in order (`TraceReader`), one line at a time.

Timestamps are milliseconds and must never decrease down the file; the replay keeps their
gaps, counted from the first row's.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import io
import json
import math
import mmap
import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from zqbench.errors import UsageError
from zqbench.load.bounds import (
    MAX_LARGE_HASH_IDS,
    MAX_OUTPUT_TOKENS,
    MAX_PROMPT_TOKENS,
    MAX_ROW_BYTES,
    MAX_TRACE_ROWS,
    MAX_TRACE_SPAN_MS,
)

TRACE_FORMATS = ("auto", "mooncake", "tokens")
DEFAULT_BLOCK_TOKENS = 512  # mooncake's block size
_TOKENS_FIELDS = ("timestamp", "input_tokens", "output_tokens")
_MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_PIECE_ROWS = 1 << 20
_MAX_ID = 1 << 63
_BITMAP_IDS = 1 << 32  # hash ids below this are marked in a bitmap, larger ones in a set
_LAST_NS = 1 << 62  # a time scaled past this is past any run's end (30 days): kept at it
T = TypeVar("T")


class TraceError(UsageError):
    """A trace that cannot be read or has a bad row: exit 2, before any load."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    number: int  # the row's index among the file's rows, from 0 (its request id)
    timestamp_ms: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...]  # empty for a tokens row


@dataclass(frozen=True)
class TraceFile:
    """Which file it was: what shows two runs replayed the same one."""

    sha256: str
    size: int  # bytes
    format: str  # as read ("auto" resolved)
    rows: int


@dataclass(frozen=True)
class TraceIndex:
    file: TraceFile
    times_ns: np.ndarray  # int64 per row: its timestamp less the first row's, in ns
    input_tokens: int  # the rows' total
    # Prompt tokens an unbounded prefix cache would serve: per row, the leading blocks
    # seen in an earlier row (the last, partial block counted at its length).
    ideal_hit_tokens: int

    @property
    def ideal_reuse(self) -> float | None:
        """The hit rate an unbounded cache would give; None without hash ids."""
        if self.file.format != "mooncake" or self.input_tokens == 0:
            return None
        return self.ideal_hit_tokens / self.input_tokens


def scan(path: Path, fmt: str, block_tokens: int) -> TraceIndex:
    """Read `path` once: hash it, check every row, keep the timestamps and the totals."""
    f, size = open_rows(path, "trace", TraceError)
    with f:
        digest = hashlib.sha256()
        rows = _Rows(path, fmt, block_tokens, digest)
        times = array("d")
        seen = _Seen()
        inputs = hits = 0
        last = -math.inf
        for row in rows.all(f):
            where = f"trace {path} line {rows.line}"
            if row.timestamp_ms < last:
                raise TraceError(
                    f"{where}: timestamp {row.timestamp_ms:g} is before the row above's "
                    f"{last:g}; sort the trace by timestamp"
                )
            last = row.timestamp_ms
            if times and row.timestamp_ms - times[0] > MAX_TRACE_SPAN_MS:
                # Its time in ns would pass int64 and wrap (a run taken for 0.07 s long).
                raise TraceError(
                    f"{where}: timestamp {row.timestamp_ms:g} is "
                    f"{row.timestamp_ms - times[0]:g} ms after the first row's; a trace spans "
                    f"at most {MAX_TRACE_SPAN_MS:g} ms (31 years); fix it"
                )
            if len(times) == MAX_TRACE_ROWS:
                raise TraceError(
                    f"{where}: more than {MAX_TRACE_ROWS:,} rows; a trace holds at most "
                    f"{MAX_TRACE_ROWS:,} (its index keeps each row's time): cut the file"
                )
            times.append(row.timestamp_ms)
            inputs += row.input_tokens
            try:
                hits += min(row.input_tokens, seen.leading(row.hash_ids) * block_tokens)
            except _TooManyIds:
                raise TraceError(
                    f"{where}: more than {MAX_LARGE_HASH_IDS:,} distinct hash ids of 2^32 or "
                    "more; number the ids from 0 in order of first use, as mooncake's are"
                ) from None
    if not times:
        raise TraceError(f"trace {path}: no rows in it; give a file with rows")
    return TraceIndex(
        file=TraceFile(digest.hexdigest(), size, rows.format, len(times)),
        times_ns=scaled_ns(np.frombuffer(times, dtype=np.float64), 1e6),
        input_tokens=inputs,
        ideal_hit_tokens=hits,
    )


def scaled_ns(stamps: np.ndarray, ns_per_unit: float) -> np.ndarray:
    """`stamps` less the first, times `ns_per_unit`, as int64 ns: converted a piece at a
    time, so a long trace's times cost their 8 bytes a row once, not three times over."""
    out = np.empty(len(stamps), dtype=np.int64)
    first = stamps[0] if len(stamps) else 0
    for a in range(0, len(stamps), _PIECE_ROWS):
        with np.errstate(over="ignore"):  # inf, then kept at _LAST_NS
            piece = (stamps[a : a + _PIECE_ROWS] - first) * ns_per_unit
        # Kept below int64's end: a row scaled past any run's end stays past it, never wraps.
        out[a : a + _PIECE_ROWS] = np.rint(np.minimum(piece, _LAST_NS))
    out.setflags(write=False)
    return out


def ideal_reuse(path: str, fmt: str, block_tokens: int, rows: int) -> float | None:
    """The ideal reuse of the trace's first `rows` rows (a replay cut short), read again."""
    parser, seen = _Rows(Path(path), fmt, block_tokens, None), _Seen()
    hits = inputs = 0
    with Path(path).open("rb") as f:
        for row in parser.all(f):
            if row.number >= rows:
                break
            inputs += row.input_tokens
            hits += min(row.input_tokens, seen.leading(row.hash_ids) * block_tokens)
    return hits / inputs if parser.format == "mooncake" and inputs else None


class TraceReader:
    """A worker's cursor over the rows (checked by `scan`): `row(n)` for rising n. The file
    is read 64 KiB at a time, opened for each read, so no worker holds it open between
    requests and a row costs a line's split, not a file's open."""

    _READ = 1 << 16

    def __init__(self, path: str, fmt: str, block_tokens: int) -> None:
        self._args = (Path(path), fmt, block_tokens)
        self._rewind()

    def _rewind(self) -> None:
        path, fmt, block_tokens = self._args
        self._rows = _Rows(path, fmt, block_tokens, None)
        self._buffer = b""  # the last piece read; the next line starts at `_at`
        self._at = 0
        self._offset = 0  # bytes read from the file

    def _line(self) -> bytes:
        """The next line (with its newline), b"" at the end of the file."""
        while True:
            end = self._buffer.find(b"\n", self._at) + 1
            if end:
                line, self._at = self._buffer[self._at : end], end
                return line
            rest = self._buffer[self._at :]
            fd = os.open(self._args[0], os.O_RDONLY)
            try:
                more = os.pread(fd, max(self._READ, len(rest)), self._offset)
            finally:
                os.close(fd)
            self._buffer, self._at = rest + more, 0
            if not more:
                self._buffer = b""
                return rest
            self._offset += len(more)

    def row(self, number: int) -> TraceRow:
        if number < self._rows.number:  # asked out of order: read again from the top
            self._rewind()
        while raw := self._line():
            row = self._rows.parse(raw)
            if row is not None and row.number == number:
                return row
        raise TraceError(f"trace {self._args[0]}: no row {number}; it changed since it was read")


class _TooManyIds(Exception):
    """More large hash ids than MAX_LARGE_HASH_IDS: the set would grow without bound."""


class _Seen:
    """Hash ids seen so far: a bitmap for the small ids traces use, a set beyond it.

    The bitmap is an anonymous mapping of 2^32 bits (512 MiB of address space): the kernel
    gives it pages only where ids are marked, so a trace whose ids run to 2^32 - 1 costs
    the pages it touches, where a bytearray grown to that id held 512 MiB, twice while it
    was copied."""

    def __init__(self) -> None:
        self._bits: mmap.mmap | None = None
        self._big: set[int] = set()

    def leading(self, ids: tuple[int, ...]) -> int:
        """How many of `ids`' leading ids were seen before; marks them all seen."""
        lead, prefix = 0, True
        for h in ids:
            was = self._mark(h)
            if prefix and was:
                lead += 1
            else:
                prefix = False
        return lead

    def _mark(self, h: int) -> bool:
        if h >= _BITMAP_IDS:
            was = h in self._big
            if not was:
                if len(self._big) >= MAX_LARGE_HASH_IDS:
                    raise _TooManyIds
                self._big.add(h)
            return was
        if self._bits is None:
            self._bits = mmap.mmap(-1, _BITMAP_IDS >> 3)
        byte, bit = h >> 3, 1 << (h & 7)
        was = bool(self._bits[byte] & bit)
        self._bits[byte] |= bit
        return was


class _Rows:
    """A trace's lines parsed and checked, one at a time; `line` is the last line's number,
    `number` the rows so far."""

    def __init__(self, path: Path, fmt: str, block_tokens: int, digest: Any | None) -> None:
        self.path, self.block_tokens, self.digest = path, block_tokens, digest
        self.line = 0
        self.number = 0
        self.format = fmt
        self._csv_columns: dict[str, int] | None = None

    def all(self, f: BinaryIO) -> Iterator[TraceRow]:
        # A line past MAX_ROW_BYTES comes cut, one byte past it, for parse to refuse: the rest of
        # it is never read.
        for raw in iter(lambda: f.readline(MAX_ROW_BYTES + 1), b""):
            row = self.parse(raw)
            if row is not None:
                yield row

    def parse(self, raw: bytes) -> TraceRow | None:
        """The line's row; None for a blank line or the CSV header."""
        self.line += 1
        if self.digest is not None:
            self.digest.update(raw)
        if len(raw) > MAX_ROW_BYTES:
            raise TraceError(
                f"{self._where()}: longer than {MAX_ROW_BYTES >> 20} MiB; give one request a line"
            )
        text = (raw.removeprefix(b"\xef\xbb\xbf") if self.line == 1 else raw).strip()
        if not text:
            return None
        if self.format == "auto":
            self.format = self._sniff(text)
        if self.format == "tokens" and not text.startswith((b"{", b"[")):
            obj = self._csv_values(text)
            if obj is None:  # the header
                return None
        else:
            obj = self._object(text)
        row = self._row(obj)
        self.number += 1
        return row

    def _where(self) -> str:
        return f"trace {self.path} line {self.line}"

    def _sniff(self, text: bytes) -> str:
        if not text.startswith((b"{", b"[")):
            return "tokens"  # a CSV header
        obj = self._object(text)
        if "hash_ids" in obj or "input_length" in obj:
            return "mooncake"
        if "input_tokens" in obj:
            return "tokens"
        raise TraceError(
            f"{self._where()}: neither a mooncake row ({', '.join(_MOONCAKE_FIELDS)}) nor a "
            f"tokens row ({', '.join(_TOKENS_FIELDS)}); give one, or set the trace's format"
        )

    def _object(self, text: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as e:
            problem = e.msg if isinstance(e, json.JSONDecodeError) else "not valid UTF-8 JSON"
            raise TraceError(
                f"{self._where()}: not JSON ({problem}); give one JSON object a line"
            ) from None
        if not isinstance(obj, dict):
            raise TraceError(f"{self._where()}: not a JSON object; give one object a line")
        return obj

    def _row(self, obj: dict[str, Any]) -> TraceRow:
        names = _MOONCAKE_FIELDS if self.format == "mooncake" else _TOKENS_FIELDS
        for name in names:
            if name not in obj:
                raise TraceError(
                    f"{self._where()}: no {name} (a {self.format} row has "
                    f"{', '.join(names)}); add it"
                )
        stamp = self._timestamp(obj["timestamp"])
        inputs = self._count(names[1], obj[names[1]])
        outputs = self._count(names[2], obj[names[2]])
        ids: tuple[int, ...] = ()
        if self.format == "mooncake":
            ids = self._hash_ids(obj["hash_ids"], inputs)
        return TraceRow(self.number, stamp, inputs, outputs, ids)

    def _csv_values(self, text: bytes) -> dict[str, Any] | None:
        """A CSV row's cells by column name, as numbers; None for the header."""
        try:
            cells = next(csv.reader(io.StringIO(text.decode("utf-8"))))
        except (UnicodeDecodeError, csv.Error, StopIteration):
            raise TraceError(
                f"{self._where()}: not a CSV row; give comma-separated values"
            ) from None
        if self._csv_columns is None:
            columns = {name.strip(): i for i, name in enumerate(cells)}
            lacking = [name for name in _TOKENS_FIELDS if name not in columns]
            if lacking:
                raise TraceError(
                    f"{self._where()}: the CSV header lacks {', '.join(lacking)} (a tokens "
                    f"trace names {', '.join(_TOKENS_FIELDS)} in its first line)"
                )
            self._csv_columns = {name: columns[name] for name in _TOKENS_FIELDS}
            return None
        values: dict[str, Any] = {}
        for name, i in self._csv_columns.items():
            cell = cells[i].strip() if i < len(cells) else ""
            values[name] = _number(cell)
            if values[name] is None:
                raise TraceError(f"{self._where()}: {name} = {cell!r} is not a number; fix it")
        return values

    def _timestamp(self, value: Any) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0 or value > 1e15:
            raise TraceError(
                f"{self._where()}: timestamp = {_shown(value)} must be a number of "
                "milliseconds >= 0; fix it"
            )
        return float(value)

    def _count(self, name: str, value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TraceError(
                f"{self._where()}: {name} = {_shown(value)} must be a whole number of tokens "
                ">= 1; fix it"
            )
        # Checked before the prompt is built: 1e9 tokens built a 1 GB prompt in the worker.
        most, why = (
            (MAX_PROMPT_TOKENS, "past any model's context")
            if name in ("input_tokens", "input_length")
            else (MAX_OUTPUT_TOKENS, "longer than any model answers")
        )
        if value > most:
            raise TraceError(
                f"{self._where()}: {name} = {value} is more than {most:,} tokens, {why}; fix it"
            )
        return value

    def _hash_ids(self, value: Any, input_tokens: int) -> tuple[int, ...]:
        if not isinstance(value, list) or not all(
            type(h) is int and 0 <= h < _MAX_ID for h in value
        ):
            raise TraceError(
                f"{self._where()}: hash_ids = {_shown(value)} must be a list of whole numbers "
                ">= 0; fix it"
            )
        need = -(-input_tokens // self.block_tokens)
        if len(value) != need:
            raise TraceError(
                f"{self._where()}: hash_ids has {len(value)} ids, but input_length "
                f"{input_tokens} makes {need} blocks of {self.block_tokens} tokens; set the "
                "trace's block_tokens to the size it was made with"
            )
        return tuple(value)


def _number(cell: str) -> float | int | None:
    with contextlib.suppress(ValueError):
        return int(cell)
    try:
        return float(cell)
    except ValueError:
        return None


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def open_rows(path: Path, what: str, error: type[UsageError]) -> tuple[BinaryIO, int]:
    """`path` open for its index pass, and its size; `error` naming `what` (a trace or a
    dataset) when it cannot be read or is empty."""
    try:
        size = path.stat().st_size
        f = path.open("rb")
    except OSError as e:
        raise error(f"{what} {path}: cannot read it ({e.strerror}); check the path") from None
    if size == 0:
        f.close()
        raise error(f"{what} {path}: the file is empty; give a file with rows")
    return f, size


def stat_cached(
    scan: Callable[..., T], what: str, error: type[UsageError], maxsize: int
) -> Callable[..., T]:
    """`index(path, *args)`: `scan(Path(path), *args)`, read once per process while the file
    stays as it was (its size and mtime); `error` naming `what` when it cannot be read."""
    cached = functools.lru_cache(maxsize)(lambda path, args, _size, _mtime: scan(path, *args))

    def index(path: str, *args: Any) -> T:
        try:
            st = os.stat(path)
        except OSError as e:
            raise error(f"{what} {path}: cannot read it ({e.strerror}); check the path") from None
        return cached(Path(path), args, st.st_size, st.st_mtime_ns)

    return index


def check_copy(what: str, path: str, size: int, error: type[UsageError]) -> None:
    """A worker's copy of the master's file (a trace or dataset): `error` unless it is at the
    same path, `size` bytes."""
    found = os.stat(path).st_size if os.path.isfile(path) else None
    if found != size:
        shown = "no such file" if found is None else f"{found} bytes, not {size}"
        raise error(
            f"{what} {path} on this worker: {shown}; give every worker the master's file at "
            "the same path"
        )
