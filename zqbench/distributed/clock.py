"""A worker's offset to the master's monotonic clock, NTP-style.

One round: the worker sends at t1 (its clock), the master stamps t2 on receipt and t3 on
reply (its clock), the worker reads the reply at t4. Whatever the asymmetry of the path,
the true offset lies within rtt / 2 of the estimate; the round with the smallest RTT is
the one least disturbed by queues and scheduling, so it is the one kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ROUNDS = 16


@dataclass(frozen=True, slots=True)
class ClockRound:
    t1: int  # worker clock, ns: ping sent
    t2: int  # master clock, ns: ping received
    t3: int  # master clock, ns: pong sent
    t4: int  # worker clock, ns: pong received

    @property
    def rtt_ns(self) -> int:
        return (self.t4 - self.t1) - (self.t3 - self.t2)

    @property
    def offset_ns(self) -> int:
        """Master clock minus worker clock."""
        return ((self.t2 - self.t1) + (self.t3 - self.t4)) // 2


@dataclass(frozen=True, slots=True)
class ClockOffset:
    offset_ns: int  # master clock minus worker clock
    uncertainty_ns: int  # the true offset is within +- this (half the best round trip)
    rtt_ns: int
    rounds: int

    def to_worker(self, master_ns: int) -> int:
        """An instant on the master's clock, on the worker's."""
        return master_ns - self.offset_ns


def best_offset(rounds: Sequence[ClockRound]) -> ClockOffset:
    """The minimum-RTT round's offset; ValueError without a round."""
    if not rounds:
        raise ValueError("no clock round completed")
    best = min(rounds, key=lambda r: r.rtt_ns)
    rtt = max(0, best.rtt_ns)
    return ClockOffset(best.offset_ns, (rtt + 1) // 2, rtt, len(rounds))
