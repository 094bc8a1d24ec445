"""Requests read from a dataset file: `[request.dataset]` or `--dataset PATH`.

The file is read once, before any load, by the index pass (`dataset_rows.scan`): it is
hashed, every row is checked (a bad row is exit 2 with its line), and the rows outside the
length filters are dropped. The source then holds only each kept row's byte span and
sizes; a worker reads the row it sends from the file, so a large file is never in memory.

Which row a request gets is a function of the run's seed and the request, never of timing:

    an arrival (open loop)   request id i -> kept row order[i mod n]
    a virtual user's j-th    its own start s (seeded) -> order[(s + j) mod n]

`order` is the kept rows in file order (`order = "sequential"`) or a seeded shuffle of
them. A run needing more requests than rows wraps around. Each sample records its row
(`source_row`), and summary.json the file's sha256, so two runs can be shown to have sent
the same requests (`zqbench compare` warns when the hashes differ).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from zqbench.dialects import DIALECTS
from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot
from zqbench.load.trace_file import check_copy, stat_cached
from zqbench.scenario import DatasetConfig, Scenario, shown_path
from zqbench.sources.dataset_rows import DatasetError, DatasetFile, read_row, scan

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration

_ORDER_STREAM = 3  # SeedSequence spawn keys: 1 and 2 are the class draws' (mix.py)
_USER_STREAM = 4


@dataclass(frozen=True)
class DatasetSource:
    wire_name: ClassVar[str] = "dataset"

    config: DatasetConfig
    file: DatasetFile  # a worker checks that its copy of the file is this one (its size)
    request_class: str
    max_tokens: int  # for a row that gives no output length
    stream: bool
    exact_output: bool  # ask the server for exactly each row's output length
    seed: int
    # One entry per kept row, in sending order.
    rows: np.ndarray = field(repr=False)  # the row's number in the file (from 0)
    offsets: np.ndarray = field(repr=False)
    lengths: np.ndarray = field(repr=False)
    prompt_tokens: np.ndarray = field(repr=False)  # estimated
    output_tokens: np.ndarray = field(repr=False)  # the row's; -1 where it gives none
    output_statement: str = ""  # whether output lengths were forced, and why not

    def open(self) -> DatasetRequests:
        return DatasetRequests(self)

    def prompt_bytes(self) -> dict[str, int]:
        return {self.request_class: int(np.mean(self.lengths))}

    def describe(self) -> dict[str, Any]:
        given = self.output_tokens >= 0
        return {
            "source": self.wire_name,
            "path": shown_path(self.config.path),
            "format": self.file.format,
            "sha256": self.file.sha256,
            "rows_in_file": self.file.rows,
            "rows_kept": len(self.rows),
            "order": self.config.order,
            "prompt_tokens_filter": _span(self.config.prompt_tokens),
            "output_tokens_filter": _span(self.config.output_tokens),
            "rows_with_output_length": int(given.sum()),
            "output_lengths": self.output_statement,
        }

    def to_wire(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        arrays = {name: data[name].astype("<i8").tobytes() for name in _ARRAYS}
        files = {"config": dataclasses.asdict(self.config), "file": dataclasses.asdict(self.file)}
        return data | files | arrays

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> DatasetSource:
        c = data["config"]
        spans = {k: _pair(c[k]) for k in ("prompt_tokens", "output_tokens")}
        fields = {f.name: data[f.name] for f in dataclasses.fields(cls)}
        arrays = {name: np.frombuffer(data[name], dtype="<i8") for name in _ARRAYS}
        files = {"config": DatasetConfig(**c | spans), "file": DatasetFile(**data["file"])}
        return cls(**fields | files | arrays)


_ARRAYS = ("rows", "offsets", "lengths", "prompt_tokens", "output_tokens")


def _span(span: tuple[int, int] | None) -> list[int] | None:
    return None if span is None else list(span)


def _pair(span: list[int] | None) -> tuple[int, int] | None:
    return None if span is None else (int(span[0]), int(span[1]))


def check(config: DatasetConfig) -> None:
    """Read and check the whole file now, before the target is contacted (exit 2 for a bad
    row); `fit` then finds the index ready."""
    _index(config.path, config.format)


# (path, format) -> the file's Index, read once per process while the file stays as it was
_index = stat_cached(scan, "dataset", DatasetError, maxsize=4)


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> DatasetSource:
    """Index the scenario's dataset, drop the rows outside its filters, order the rest.
    Token counts are estimated from bytes by the calibration (else 4 bytes a token)."""
    config = scenario.request.dataset
    assert config is not None

    index = _index(config.path, config.format)
    prompt_tokens = _tokens_of_bytes(index.prompt_bytes, calibration)
    # A ShareGPT row's length is its answer's: estimated like a prompt, at least 1 token.
    answer = np.maximum(1, _tokens_of_bytes(index.answer_bytes, calibration))
    output_tokens = np.where(
        index.output_tokens >= 1, index.output_tokens, np.where(index.answer_bytes >= 0, answer, -1)
    )
    cap = scenario.request.max_tokens
    asked = np.where(output_tokens >= 1, output_tokens, cap)
    keep = np.ones(index.file.rows, dtype=bool)
    for span, values in ((config.prompt_tokens, prompt_tokens), (config.output_tokens, asked)):
        if span is not None:
            keep &= (values >= span[0]) & (values <= span[1])
    kept = np.flatnonzero(keep)
    if len(kept) == 0:
        raise DatasetError(
            f"dataset {config.path}: none of its {index.file.rows} rows pass the filters "
            f"(prompt_tokens {_span(config.prompt_tokens)}, output_tokens "
            f"{_span(config.output_tokens)}); widen them"
        )
    if config.order == "shuffle":
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_ORDER_STREAM,)))
        kept = rng.permutation(kept)
    statement = DIALECTS[scenario.api].exact_output_statement
    exact = config.force_output and statement is None
    if not config.force_output:
        statement = "not asked (force_output = false)"
    return DatasetSource(
        config=config,
        file=index.file,
        request_class=scenario.request.mix[0].name,
        max_tokens=cap,
        stream=scenario.request.stream,
        exact_output=exact,
        seed=seed,
        rows=kept.astype(np.int64),
        offsets=index.offsets[kept],
        lengths=index.lengths[kept],
        prompt_tokens=prompt_tokens[kept],
        output_tokens=output_tokens[kept],
        output_statement=statement or "forced (min_tokens = max_tokens, ignore_eos)",
    )


def _tokens_of_bytes(n_bytes: np.ndarray, calibration: Calibration | None) -> np.ndarray:
    """`tokens_of` over every row at once (a file may have millions)."""
    if calibration is None:  # dialects.common.estimate_tokens: about 4 bytes a token
        return np.where(n_bytes > 0, np.maximum(1, (n_bytes + 2) // 4), 0).astype(np.int64)
    tokens = calibration.tokens_per_byte * n_bytes + calibration.base_tokens
    return np.maximum(1, np.round(tokens)).astype(np.int64)


class DatasetRequests:
    """One worker's reader: the file open, each request's row read from its span."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        # A distributed worker reads its own copy, at the master's path.
        check_copy("dataset", source.config.path, source.file.size, DatasetError)
        self._users: dict[int, list[int]] = {}  # user -> [start, requests so far]

    def _position(self, slot: Slot) -> int:
        if slot.user is None:
            return slot.request_id
        state = self._users.get(slot.user)
        if state is None:
            seq = np.random.SeedSequence(self.source.seed, spawn_key=(_USER_STREAM, slot.user))
            start = int(np.random.default_rng(seq).integers(len(self.source.rows)))
            state = self._users[slot.user] = [start, 0]
        state[1] += 1
        return state[0] + state[1] - 1

    def request(self, slot: Slot) -> RequestSpec:
        s = self.source
        i = self._position(slot) % len(s.rows)
        row = read_row(s.config.path, int(s.offsets[i]), int(s.lengths[i]), s.file.format)
        out = int(s.output_tokens[i])
        return RequestSpec(
            request_class=s.request_class,
            prompt=row.prompt,
            max_tokens=out if out >= 1 else s.max_tokens,
            stream=s.stream,
            prompt_tokens_estimate=int(s.prompt_tokens[i]),
            system=row.system,
            history=row.history,
            exact_output=s.exact_output and out >= 1,
            source_row=int(s.rows[i]),
            tools=row.tools,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        """A dataset's requests do not depend on earlier answers."""
