"""Request classes: which entry of the scenario's mix each request belongs to.

Draws come from private streams derived from the run's seed with numpy's SeedSequence,
independent of the arrival stream (`zqbench.load.arrival_schedule`), so changing the
arrival process never reshuffles the classes:

- a slot without a user (open loop): draw i of one stream (`SeedSequence(seed,
  spawn_key=(1,))`) for request id i, whichever worker sends it (`SlotClasses.index`);
- a user's slot (closed loop): one stream per VU (`SeedSequence(seed,
  spawn_key=(2, vu))`), so a VU's sequence of classes does not depend on how many other
  VUs ran or how fast they were.

Each request picks class j with probability weight_j / Σ weights; in a stage with its own
`mix` (open loop), among that stage's classes only, with their weights renormalised.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from zqbench.load import Slot
from zqbench.scenario import RequestClass

_OPEN_LOOP_STREAM = 1
_VU_STREAM = 2
_BLOCK = 1024  # draws taken at a time


def _cumulative(mix: tuple[RequestClass, ...]) -> np.ndarray:
    if not mix:
        raise ValueError("the request mix is empty")
    w = np.array([c.weight for c in mix], dtype=np.float64)
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError(f"mix weights must be > 0, got {w.tolist()}")
    cum = np.cumsum(w) / w.sum()
    cum[-1] = 1.0  # no draw may fall past the last class through rounding
    return cum


class ClassPicker:
    """One closed-loop VU's own deterministic sequence of request classes."""

    __slots__ = ("_buf", "_cum", "_i", "_mix", "_rng")

    def __init__(self, mix: tuple[RequestClass, ...], seed: int, vu: int) -> None:
        self._mix = mix
        self._cum = _cumulative(mix)
        self._rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_VU_STREAM, vu)))
        self._buf = np.empty(0, dtype=np.int16)
        self._i = 0

    def next_index(self) -> int:
        if len(self._mix) == 1:
            return 0
        if self._i == len(self._buf):
            draws = self._rng.random(_BLOCK)
            self._buf = np.searchsorted(self._cum, draws, side="right").astype(np.int16)
            self._i = 0
        j = int(self._buf[self._i])
        self._i += 1
        return j


class SlotClasses:
    """A slot's class: by request id for an arrival (`index`), from its user's own stream
    (a `ClassPicker`) for a virtual user's request.

    The class of request id i is drawn as ids arrive: the i-th uniform of the stream, in
    whichever order and on whichever worker the ids come. numpy draws the stream's uniforms
    one after another whatever the block size, so extending the draws in blocks gives the
    same i-th draw as one vectorised call. A stage with its own mix maps request i's one
    draw through the cumulative weights of its own classes, so restricting one stage never
    changes the classes of another."""

    __slots__ = ("_by_stage", "_cum", "_draws", "_mix", "_n_classes", "_rng", "_seed", "_users")

    def __init__(
        self,
        mix: tuple[RequestClass, ...],
        seed: int,
        stage_mixes: Sequence[tuple[str, ...] | None] = (),
    ) -> None:
        self._mix, self._seed = mix, seed
        self._users: dict[int, ClassPicker] = {}
        self._n_classes = len(mix)
        self._cum = _cumulative(mix).tolist()
        names = [c.name for c in mix]
        self._by_stage: list[tuple[list[int], list[float]] | None] = []
        for allowed in stage_mixes:
            if allowed is None:
                self._by_stage.append(None)
                continue
            index = [names.index(name) for name in allowed]
            sub = _cumulative(tuple(mix[i] for i in index)).tolist()
            self._by_stage.append((index, sub))
        self._rng = np.random.default_rng(
            np.random.SeedSequence(seed, spawn_key=(_OPEN_LOOP_STREAM,))
        )
        self._draws = np.empty(0, dtype=np.float64)

    def of(self, slot: Slot) -> int:
        if slot.user is None:
            return self.index(slot.request_id, slot.stage)
        picker = self._users.get(slot.user)
        if picker is None:
            picker = self._users[slot.user] = ClassPicker(self._mix, self._seed, slot.user)
        return picker.next_index()

    def index(self, request_id: int, stage: int) -> int:
        if self._n_classes == 1:
            return 0
        while request_id >= len(self._draws):
            more = self._rng.random(max(_BLOCK, len(self._draws)))
            self._draws = np.concatenate((self._draws, more))
        draw = float(self._draws[request_id])
        restricted = self._by_stage[stage] if stage < len(self._by_stage) else None
        if restricted is None:
            return bisect.bisect_right(self._cum, draw)
        index, sub = restricted
        return index[bisect.bisect_right(sub, draw)]
