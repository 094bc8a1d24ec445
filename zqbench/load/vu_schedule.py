"""Closed-loop plans: how many virtual users (VUs) should run at each moment.

k6 ramping-vus semantics. The target starts at `start_vus`; each stage moves it linearly
to the stage's target, one whole VU at a time: on a ramp from a to b over d, the count
changes by one each time the straight line from a to b crosses a whole number, so

    target(t) = a + sign(b - a) · ⌊|b - a| · e / d⌋      e = time since the stage began

(the count reaches b exactly at the stage's end). Ramping up from 0 to 10 over 10 s adds
VU 1 at 1 s, ..., VU 10 at 10 s; ramping down from 10 to 0 removes one VU each second.
This equals k6's execution steps (`getRawExecutionSteps`). A 0 s stage is an instant step.
Times are whole nanoseconds, so the arithmetic is exact. At and after the end of the run
the target is 0.

What the engine does with it (constant-vus is one flat stage):

- VU n (0-based) runs while the target is above n: raising the target starts the
  lowest-numbered missing VUs, lowering it stops the highest-numbered first (k6 LIFO).
- Each VU loops: send a request, wait for the whole response, sleep `think_time_ns`.
  `think_time_ns` is 0 when the scenario has none (back-to-back requests).
- Graceful ramp-down (k6 gracefulRampDown) and graceful stop: a VU that must stop never
  starts another request; one sleeping stops at once; one with a request in flight lets
  it finish, but for at most `graceful_stop` after the VU was told to stop (or after
  the run's end); then the request is cancelled and recorded as interrupted.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zqbench.load.vus import VuLoad

_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class VuPlan:
    bounds_ns: tuple[int, ...]  # stage boundaries: K + 1 values from 0 to the run's end
    from_vus: tuple[int, ...]  # each stage's starting target (the previous stage's target)
    to_vus: tuple[int, ...]  # each stage's target
    think_time_ns: int

    @property
    def duration_ns(self) -> int:
        return self.bounds_ns[-1]

    def stage_at(self, t_ns: int) -> int:
        """The stage running at `t_ns`: stage k holds bounds[k] <= t < bounds[k+1].

        A 0 s stage holds no time. At or after the end this is the last stage.
        """
        if t_ns < 0:
            raise ValueError(f"t_ns must be >= 0, got {t_ns}")
        k = bisect.bisect_right(self.bounds_ns, t_ns) - 1
        return min(k, len(self.to_vus) - 1)

    def target_at(self, t_ns: int) -> int:
        """The number of VUs that should be running at `t_ns` (0 at and after the end)."""
        if t_ns >= self.duration_ns:
            if t_ns < 0:
                raise ValueError(f"t_ns must be >= 0, got {t_ns}")
            return 0
        k = self.stage_at(t_ns)
        a, b = self.from_vus[k], self.to_vus[k]
        d = self.bounds_ns[k + 1] - self.bounds_ns[k]
        e = t_ns - self.bounds_ns[k]
        step = abs(b - a) * e // d  # d > 0: a 0 s stage never holds t
        return a + step if b >= a else a - step


def vu_plan(load: VuLoad) -> VuPlan:
    """The VU plan of a constant-vus or ramping-vus scenario."""
    bounds = (0, *accumulate(round(s.duration_s * _NS) for s in load.stages))
    targets = tuple(int(s.target) for s in load.stages)
    start = int(load.start_vus or 0)
    return VuPlan(
        bounds_ns=bounds,
        from_vus=(start, *targets[:-1]),
        to_vus=targets,
        think_time_ns=round((load.think_time_s or 0.0) * _NS),
    )
