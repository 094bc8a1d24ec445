"""What the master knows of each worker: who it is, its clock, what it was given and what
arrived. Received batches go straight to the run folder's `samples.w<i>.arrows`, the file a
local worker would have written, so stage 4 merges them unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from zqbench.distributed.clock import ClockOffset
from zqbench.engines.live import WorkerProgress
from zqbench.load import Work
from zqbench.safe_files import open_new
from zqbench.samples.sample import ARROW_SCHEMA
from zqbench.samples.writer import stream_path

State = Literal["joined", "assigned", "ready", "running", "done", "stopped", "lost"]
FINISHED: tuple[State, ...] = ("done", "stopped", "lost")


class BatchWriter:
    """An Arrow stream of record batches, flushed to the kernel after each one."""

    def __init__(self, path: Path) -> None:
        self._file = open_new(path)  # never through a link; closed in close()
        self._writer = ipc.new_stream(self._file, ARROW_SCHEMA)

    def write(self, table: pa.Table) -> None:
        for batch in table.to_batches():
            self._writer.write_batch(batch)
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._writer.close()
            self._file.close()


@dataclass
class WorkerSlot:
    """One worker of the run, from its hello to its end."""

    node: str  # Locust's client id
    host: str
    index: int = -1
    state: State = "joined"
    work: Work | None = None
    clock: ClockOffset | None = None
    writer: BatchWriter | None = None
    received_ids: list[np.ndarray] = field(default_factory=list)
    received: int = 0
    progress: WorkerProgress | None = None
    sent: int | None = None  # as the worker said in zq_done
    lost_at_s: float | None = None  # run time when the master gave it up
    failure: str = ""

    def assign(self, index: int, work: Work, out_dir: Path) -> None:
        self.index, self.work, self.state = index, work, "assigned"
        self.writer = BatchWriter(stream_path(out_dir, index))

    def add(self, table: pa.Table) -> None:
        if self.writer is None or self.state in FINISHED:
            return  # a batch after its end (or before its slot): not part of the run
        self.writer.write(table)
        self.received += table.num_rows
        self.received_ids.append(table.column("request_id").to_numpy())

    def finish(self, state: State, *, at_s: float | None = None, why: str = "") -> None:
        if self.state in FINISHED:
            return
        self.state = state
        if state == "lost":
            self.lost_at_s, self.failure = at_s, why
        if self.writer is not None:
            self.writer.close()

    def missing(self) -> tuple[int, float | None, float | None]:
        """(requests of its share that were scheduled and never arrived, their first and
        last intended time in s); (0, None, None) when nothing was scheduled in advance."""
        if self.work is None:
            return 0, None, None
        got = np.concatenate(self.received_ids) if self.received_ids else np.array([], np.int64)
        return self.work.missing(got)
