"""The open-loop sends waiting for a connection (engines.native.Waiting): four numbers a
send in one array, the oldest first, through the compaction that gives back the space of
the ones that left."""

from __future__ import annotations

from zqbench.engines.native import Waiting
from zqbench.load import Slot


def test_the_oldest_send_leaves_first_across_compactions() -> None:
    waiting = Waiting()
    left = []
    for i in range(100_000):  # pushes and pops interleaved, more pushes: the array grows
        waiting.push(Slot(i, i % 3), due_abs=10 * i, since=10 * i + 1)
        if i % 3 == 0:
            left.append(waiting.pop())
    while waiting:
        left.append(waiting.pop())
    assert len(waiting) == 0 and len(left) == 100_000
    assert [slot.request_id for slot, _, _ in left] == list(range(100_000))
    assert all(
        slot.stage == slot.request_id % 3 and due == 10 * slot.request_id and since == due + 1
        for slot, due, since in left
    )


def test_a_waiting_send_keeps_what_its_row_needs() -> None:
    waiting = Waiting()
    waiting.push(Slot(2**62, 7), due_abs=-5, since=2**63 - 1)  # int64 at both ends
    assert len(waiting) == 1
    assert waiting.pop() == (Slot(2**62, 7), -5, 2**63 - 1)
