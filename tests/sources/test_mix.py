"""Request classes from mix weights: proportions, determinism, independent streams."""

from __future__ import annotations

import numpy as np
import pytest

from zqbench.load import Slot
from zqbench.scenario import RequestClass
from zqbench.sources.mix import ClassPicker, SlotClasses

MIX = (
    RequestClass("short", 7.0, 32, None),
    RequestClass("medium", 2.0, 1024, None),
    RequestClass("long", 1.0, 131072, 16),
)


def assign_classes(
    mix: tuple[RequestClass, ...],
    n: int,
    seed: int,
    *,
    stage: np.ndarray | None = None,
    stage_mixes: list[tuple[str, ...] | None] | None = None,
) -> np.ndarray:
    """The classes of open-loop requests 0..n-1, as SlotClasses draws them."""
    by_id = SlotClasses(mix, seed, stage_mixes or ())
    return np.array([by_id.index(i, 0 if stage is None else int(stage[i])) for i in range(n)])


def test_open_loop_proportions() -> None:
    c = assign_classes(MIX, 100_000, seed=1)
    share = np.bincount(c, minlength=3) / len(c)
    # Binomial standard error at n = 100 000 is at most 0.0016; 0.01 is over 6 sigma.
    np.testing.assert_allclose(share, [0.7, 0.2, 0.1], atol=0.01)


def test_open_loop_deterministic_and_seeded() -> None:
    a = assign_classes(MIX, 1000, seed=5)
    np.testing.assert_array_equal(a, assign_classes(MIX, 1000, seed=5))
    assert not np.array_equal(a, assign_classes(MIX, 1000, seed=6))
    # A longer run extends the same sequence: request i keeps its class.
    np.testing.assert_array_equal(a, assign_classes(MIX, 5000, seed=5)[:1000])


def test_single_class_draws_nothing() -> None:
    one = (RequestClass("default", 1.0, 32, None),)
    assert assign_classes(one, 10, seed=0).tolist() == [0] * 10
    assert ClassPicker(one, 0, 0).next_index() == 0


def test_vu_streams_are_deterministic_and_independent() -> None:
    a = [ClassPicker(MIX, 3, vu=0).next_index() for _ in range(1)]
    p0, p0b, p1 = ClassPicker(MIX, 3, 0), ClassPicker(MIX, 3, 0), ClassPicker(MIX, 3, 1)
    s0 = [p0.next_index() for _ in range(3000)]  # crosses the 1024-draw refill
    assert s0 == [p0b.next_index() for _ in range(3000)]
    assert s0 != [p1.next_index() for _ in range(3000)]
    assert s0[0] == a[0]
    share = np.bincount(s0, minlength=3) / len(s0)
    np.testing.assert_allclose(share, [0.7, 0.2, 0.1], atol=0.04)
    assert ClassPicker(MIX, 3, 0).next_index() == s0[0]


def test_bad_mix() -> None:
    with pytest.raises(ValueError):
        assign_classes((), 1, 0)
    with pytest.raises(ValueError):
        assign_classes((RequestClass("x", 0.0, 1, None),), 1, 0)


def test_stage_mix_restricts_a_stage_and_leaves_the_others_alone() -> None:
    """Stage 0 draws only from short/medium (weights 7:2 renormalised); stage 1 is
    unrestricted and gets exactly the classes the unrestricted draw gives."""
    n = 60_000
    stage = np.repeat(np.array([0, 1], dtype=np.int32), n // 2)
    free = assign_classes(MIX, n, seed=4)
    c = assign_classes(MIX, n, seed=4, stage=stage, stage_mixes=[("short", "medium"), None])
    np.testing.assert_array_equal(c[n // 2 :], free[n // 2 :])
    first = np.bincount(c[: n // 2], minlength=3) / (n // 2)
    np.testing.assert_allclose(first, [7 / 9, 2 / 9, 0.0], atol=0.01)
    np.testing.assert_array_equal(
        c, assign_classes(MIX, n, seed=4, stage=stage, stage_mixes=[("short", "medium"), None])
    )
    only_long = assign_classes(MIX, 10, seed=4, stage=np.zeros(10), stage_mixes=[("long",)])
    assert only_long.tolist() == [2] * 10


def test_class_by_id_is_the_same_whichever_worker_asks() -> None:
    """Request i gets the class the ids in order give it, in any order of ids and across
    the block refills, so splitting a schedule over workers never changes a class."""
    n = 5000
    stage = (np.arange(n) >= 3000).astype(np.int32)
    mixes = [None, ("medium", "long")]
    whole = assign_classes(MIX, n, seed=9, stage=stage, stage_mixes=mixes)
    for worker in range(3):
        by_id = SlotClasses(MIX, 9, mixes)
        ids = range(worker, n, 3)
        got = [by_id.index(i, int(stage[i])) for i in ids]
        assert got == whole[worker::3].tolist()
    backwards = SlotClasses(MIX, 9, mixes)
    assert [backwards.index(i, int(stage[i])) for i in reversed(range(n))] == whole[::-1].tolist()


def test_slot_classes_draw_by_id_for_arrivals_and_per_user_for_users() -> None:
    slots = SlotClasses(MIX, 9)
    by_id = SlotClasses(MIX, 9)
    assert [slots.of(Slot(i, 0)) for i in range(50)] == [by_id.index(i, 0) for i in range(50)]
    picker = ClassPicker(MIX, 9, 3)
    got = [slots.of(Slot(1000 + i, 0, user=3)) for i in range(50)]
    assert got == [picker.next_index() for _ in range(50)]
