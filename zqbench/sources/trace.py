"""A trace's requests (`[load] executor = "trace"`): prompts built from the rows' blocks.

The trace executor (`zqbench.load.trace`) sends row i at its time; this source makes row
i's request. A mooncake row's prompt is its blocks' texts, one per hash id, in order, cut
to the row's `input_length`: two rows with the same leading ids send the exact same
leading text, so the server's prefix cache sees the trace's own reuse. A tokens row (no
hash ids) gets text of its own. Each row asks for its `output_length`, forced where the
dialect can (as a dataset's rows are).

A block's text is a slice of one pool of synthetic words (1 MiB, from the run's seed),
at an offset drawn from the block's id, behind the id itself: building a prompt costs a
few slices, never a synthesis, so a worker keeps up with a fast trace. Blocks are sized by
the calibration: `block_tokens` of the target's tokens each.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects import DIALECTS
from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot, TraceLoad
from zqbench.load.trace_file import TraceError, TraceReader, TraceRow, file_size
from zqbench.scenario import Scenario, shown_path
from zqbench.sources.prompts import synth_text

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration

_POOL_BYTES = 1 << 20
_POOL_SEED = 9_000_000  # apart from the other sources' seeds


@dataclass(frozen=True, slots=True)
class TraceSource:
    wire_name: ClassVar[str] = "trace"

    path: str
    format: str  # as read (auto resolved)
    sha256: str
    size: int  # a worker checks that its copy of the file is this one
    rows: int  # in the file
    block_tokens: int
    block_bytes: int  # text per block, sized by the calibration
    tokens_per_byte: float  # the calibration's (1.0 without one): a row's prompt length
    base_tokens: float
    request_class: str
    stream: bool
    exact_output: bool
    output_statement: str
    seed: int
    ideal_reuse: float | None  # an unbounded prefix cache's hit rate, from the hash ids
    time_scale: float

    def open(self) -> TraceRequests:
        return TraceRequests(self)

    def prompt_bytes(self) -> dict[str, int]:
        return {self.request_class: self.block_bytes}

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.wire_name,
            "path": shown_path(self.path),
            "format": self.format,
            "sha256": self.sha256,
            "rows_in_file": self.rows,
            "block_tokens": self.block_tokens if self.format == "mooncake" else None,
            "block_bytes": self.block_bytes if self.format == "mooncake" else None,
            "time_scale": self.time_scale,
            "ideal_reuse": self.ideal_reuse,
            "output_lengths": self.output_statement,
        }

    def to_wire(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TraceSource:
        return cls(**{k: v for k, v in data.items() if k != "source"})

    def bytes_for(self, tokens: int) -> int:
        """Bytes of text for a prompt of `tokens` tokens (at least 1)."""
        return max(1, round((tokens - self.base_tokens) / self.tokens_per_byte))


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> TraceSource:
    """The trace's rows as requests, their blocks sized by the calibration (else a byte a
    token, one token of BOS)."""
    load = scenario.load
    assert isinstance(load, TraceLoad)
    index = load.index()
    statement = DIALECTS[scenario.api].exact_output_statement
    tpb, base = (
        (1.0, 1.0)
        if calibration is None
        else (
            calibration.tokens_per_byte,
            calibration.base_tokens,
        )
    )
    return TraceSource(
        path=load.path,
        format=index.file.format,
        sha256=index.file.sha256,
        size=index.file.size,
        rows=index.file.rows,
        block_tokens=load.block_tokens,
        block_bytes=max(8, round(load.block_tokens / tpb)),
        tokens_per_byte=tpb,
        base_tokens=base,
        request_class=scenario.request.mix[0].name,
        stream=scenario.request.stream,
        exact_output=statement is None,
        output_statement=statement or "forced (min_tokens = max_tokens, ignore_eos)",
        seed=seed,
        ideal_reuse=index.ideal_reuse,
        time_scale=load.time_scale,
    )


class TraceRequests:
    """One worker's cursor over the trace, and its blocks' texts."""

    def __init__(self, source: TraceSource) -> None:
        self.source = source
        size = file_size(source.path)
        if size != source.size:
            found = "no such file" if size is None else f"{size} bytes, not {source.size}"
            raise TraceError(
                f"trace {source.path} on this worker: {found}; give every worker the master's "
                "file at the same path"
            )
        self._pool = synth_text(_POOL_BYTES, seed=_POOL_SEED + source.seed)
        self._reader = TraceReader(source.path, source.format, source.block_tokens)

    def _block(self, tag: str) -> str:
        """The text of block `tag` (a hash id, or a tokens row's own): the tag, then a slice
        of the pool at an offset drawn from the tag and the seed."""
        s = self.source
        key = hashlib.blake2b(f"{s.seed}/{tag}".encode(), digest_size=8).digest()
        head = f"{tag}: "
        n = max(0, s.block_bytes - len(head) - 1)
        offset = int.from_bytes(key, "little") % (len(self._pool) - n)
        return head + self._pool[offset : offset + n] + " "

    def _prompt(self, row: TraceRow) -> str:
        s = self.source
        if row.hash_ids:
            tags = [str(h) for h in row.hash_ids]
        else:  # a tokens row: blocks of its own
            blocks = -(-row.input_tokens // s.block_tokens)
            tags = [f"r{row.number}.{k}" for k in range(blocks)]
        text = "".join(self._block(tag) for tag in tags)[: s.bytes_for(row.input_tokens)]
        # A trailing space may be stripped on the way to the tokenizer; keep the length.
        return text[:-1] + "s" if text.endswith(" ") else text

    def request(self, slot: Slot) -> RequestSpec:
        s = self.source
        row = self._reader.row(slot.request_id)
        return RequestSpec(
            request_class=s.request_class,
            prompt=self._prompt(row),
            max_tokens=row.output_tokens,
            stream=s.stream,
            prompt_tokens_estimate=row.input_tokens,
            exact_output=s.exact_output,
            source_row=row.number,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        """A trace's requests do not depend on earlier answers."""
