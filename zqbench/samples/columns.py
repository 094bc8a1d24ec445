"""samples.parquet read a column at a time, as the analysis asks for each.

    samples = SampleColumns(out_dir / "samples.parquet")
    frame = build_frame(samples)       # zqbench.metrics.frame reads it as it reads a DataFrame

The metric frame keeps each column it needs as a float64 array, so a DataFrame of the whole
table beside it held every row twice: at 2,000,000 rows the table and its DataFrame were 430
bytes a row on top of the frame's (#44). Read one at a time, a column is let go once the
frame has its own copy. `frame(names)` is a DataFrame of a few columns, for what needs
pandas' row selection (the distributed workers' lag).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from zqbench.samples.writer import unreadable


class SampleColumns:
    """The samples of one Parquet file: `name in`, `[name]` (a pandas Series, as
    `Table.to_pandas()` would give it), `len()` and `columns`, as a DataFrame offers them."""

    __slots__ = ("_n", "columns", "path")

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with unreadable(self.path):
            meta = pq.read_metadata(self.path)
        self._n = meta.num_rows
        self.columns: tuple[str, ...] = tuple(meta.schema.to_arrow_schema().names)

    def __len__(self) -> int:
        return self._n

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def __getitem__(self, name: str) -> pd.Series:
        if name not in self.columns:
            raise KeyError(name)
        # Read as the analysis asks: a damaged saved file fails here, one UsageError line
        with unreadable(self.path):
            return pq.read_table(self.path, columns=[name]).column(0).to_pandas()

    def frame(self, names: Sequence[str]) -> pd.DataFrame:
        """A DataFrame of these columns only."""
        with unreadable(self.path):
            return pq.read_table(self.path, columns=list(names)).to_pandas()


def give_back() -> None:
    """Hand back to the system what the analysis' last step freed, before its next: pyarrow's
    allocator and the C heap each keep freed memory for their own reuse, and the next
    step's arrays come from the other one as often as not. At 3,600,000 rows the two held
    about 250 MiB between steps that no step was using (#44)."""
    pa.default_memory_pool().release_unused()
    if _TRIM is not None:
        _TRIM(0)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim; None elsewhere (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


_TRIM = _malloc_trim()
