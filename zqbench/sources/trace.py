"""A trace's requests (`[load] executor = "trace"`): prompts built from the rows' blocks.

The trace executor (`zqbench.load.trace`) sends row i at its time; this source makes row
i's request. A mooncake row's prompt is its blocks' texts, one per hash id, in order, cut
to the row's `input_length`: two rows with the same leading ids send the exact same
leading text, so the server's prefix cache sees the trace's own reuse. A tokens row (no
hash ids) gets text of its own. Each row asks for its `output_length`, forced where the
dialect can (as a dataset's rows are).

A block's text is its id spelled in words, then a slice of one pool of synthetic words
(1 MiB, from the run's seed) at a word drawn from the id: building a prompt costs a few
slices, never a synthesis, so a worker keeps up with a fast trace. Blocks are sized by
the calibration: `block_tokens` of the target's tokens each.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects import DIALECTS
from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot, TraceLoad
from zqbench.load.executor import WireFields
from zqbench.load.trace_file import TraceError, TraceReader, TraceRow, check_copy, ideal_reuse
from zqbench.scenario import Scenario, shown_path
from zqbench.sources.prompts import WORDS, synth_text

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration

_POOL_BYTES = 1 << 20
_POOL_SEED = 9_000_000  # apart from the other sources' seeds
_CACHED_BLOCKS = 4096  # at most a few MiB of text
_OWN_BLOCKS = 1 << 63  # a tokens row's blocks' keys, above every hash id


def _id_words(key: int) -> str:
    """`key` in base len(WORDS), three words at least: a short head no other key has."""
    words: list[str] = []
    while key or len(words) < 3:
        key, digit = divmod(key, len(WORDS))
        words.append(WORDS[digit])
    return " ".join(words) + " "


@dataclass(frozen=True, slots=True)
class TraceSource(WireFields):
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
    rows_scheduled: int  # the first rows, within the replay's cut

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
            "rows_scheduled": self.rows_scheduled,
            "block_tokens": self.block_tokens if self.format == "mooncake" else None,
            "block_bytes": self.block_bytes if self.format == "mooncake" else None,
            "time_scale": self.time_scale,
            "ideal_reuse": self.ideal_reuse,
            "output_lengths": self.output_statement,
        }

    def bytes_for(self, tokens: int) -> int:
        """Bytes of text for a prompt of `tokens` tokens (at least 1)."""
        return max(1, round((tokens - self.base_tokens) / self.tokens_per_byte))


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> TraceSource:
    """The trace's rows as requests, their blocks sized by the calibration (else a byte a
    token, one token of BOS)."""
    load = scenario.load
    assert isinstance(load, TraceLoad)
    index = load.index()
    replayed = len(load.times_ns())
    reuse = index.ideal_reuse
    if replayed < index.file.rows:  # cut short: the ideal of the rows sent
        reuse = ideal_reuse(load.path, index.file.format, load.block_tokens, replayed)
    statement = DIALECTS[scenario.api].exact_output_statement
    tpb, base = (
        (1.0, 1.0)
        if calibration is None
        else (calibration.tokens_per_byte, calibration.base_tokens)
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
        ideal_reuse=reuse,
        time_scale=load.time_scale,
        rows_scheduled=replayed,
    )


class TraceRequests:
    """One worker's cursor over the trace, and its blocks' texts."""

    def __init__(self, source: TraceSource) -> None:
        self.source = source
        check_copy("trace", source.path, source.size, TraceError)
        self._pool = synth_text(_POOL_BYTES, seed=_POOL_SEED + source.seed)
        self._reader = TraceReader(source.path, source.format, source.block_tokens)
        self._blocks: dict[int, str] = {}  # recent blocks' texts: a shared prefix recurs

    def _block(self, key: int) -> str:
        """Block `key`'s text: its id spelled in words, then a slice of the pool from a word
        start drawn from the key and the seed. The id makes two blocks' texts differ from
        their first word; the slice makes them read like the calibrated prompts."""
        text = self._blocks.get(key)
        if text is not None:
            return text
        if len(self._blocks) >= _CACHED_BLOCKS:
            self._blocks.clear()
        s = self.source
        head = _id_words(key)
        n = max(1, s.block_bytes - len(head))
        digest = hashlib.blake2b(f"{s.seed}/{key}".encode(), digest_size=8).digest()
        start = int.from_bytes(digest, "little") % (len(self._pool) - n - 64)
        start = self._pool.index(" ", start) + 1
        text = self._blocks[key] = head + self._pool[start : start + n - 1] + " "
        return text

    def _prompt(self, row: TraceRow) -> str:
        s = self.source
        if row.hash_ids:
            keys: list[int] = list(row.hash_ids)
        else:  # a tokens row: blocks of its own, apart from any hash id
            blocks = -(-row.input_tokens // s.block_tokens)
            keys = [_OWN_BLOCKS + (row.number << 20) + k for k in range(blocks)]
        text = "".join(self._block(key) for key in keys)[: s.bytes_for(row.input_tokens)]
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
