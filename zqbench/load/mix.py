"""Request classes: which entry of the scenario's mix each request belongs to.

Draws come from private streams derived from the run's seed with numpy's SeedSequence,
independent of the arrival stream (`default_rng(seed)` in open_loop), so changing the
arrival process never reshuffles the classes:

- open loop: one vectorised draw for request ids 0..N-1 (stream `SeedSequence(seed,
  spawn_key=(1,))`); after `ArrivalSchedule.split`, index it with the part's request_ids;
- closed loop: one stream per VU (`SeedSequence(seed, spawn_key=(2, vu))`), so a VU's
  sequence of classes does not depend on how many other VUs ran or how fast they were.

Each request picks class j with probability weight_j / Σ weights; in a stage with its own
`mix` (open loop), among that stage's classes only, with their weights renormalised.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zqbench.scenario import RequestClass

_OPEN_LOOP_STREAM = 1
_VU_STREAM = 2
_BLOCK = 1024  # closed loop: draws taken at a time per VU


def _cumulative(mix: tuple[RequestClass, ...]) -> np.ndarray:
    if not mix:
        raise ValueError("the request mix is empty")
    w = np.array([c.weight for c in mix], dtype=np.float64)
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError(f"mix weights must be > 0, got {w.tolist()}")
    cum = np.cumsum(w) / w.sum()
    cum[-1] = 1.0  # no draw may fall past the last class through rounding
    return cum


def assign_classes(
    mix: tuple[RequestClass, ...],
    n: int,
    seed: int,
    *,
    stage: np.ndarray | None = None,
    stage_mixes: Sequence[tuple[str, ...] | None] = (),
) -> np.ndarray:
    """The class index (int16, into `mix`) of open-loop requests 0..n-1.

    `stage[i]` is request i's stage and `stage_mixes[k]` the class names stage k draws
    from (None: all). Request i keeps its one uniform draw whatever its stage; a restricted
    stage maps it through the cumulative weights of its own classes, so restricting one
    stage never changes the classes of another."""
    cum = _cumulative(mix)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if len(mix) == 1:
        return np.zeros(n, dtype=np.int16)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_OPEN_LOOP_STREAM,)))
    draws = rng.random(n)
    out = np.searchsorted(cum, draws, side="right").astype(np.int16)
    names = [c.name for c in mix]
    for k, allowed in enumerate(stage_mixes):
        if allowed is None:
            continue
        if stage is None or len(stage) != n:
            raise ValueError("stage_mixes needs the stage of every request")
        index = np.array([names.index(name) for name in allowed], dtype=np.int16)
        sub = _cumulative(tuple(mix[i] for i in index))
        here = stage == k
        out[here] = index[np.searchsorted(sub, draws[here], side="right")]
    return out


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

    def next(self) -> RequestClass:
        return self._mix[self.next_index()]
