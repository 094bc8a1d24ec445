"""`StageInfo`: a scenario stage's name and its span on the run's clock.

It sits at the bottom of the package: the schedule produces it, run hooks (impairment,
telemetry) time themselves by it, and the analysis groups samples by it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageInfo:
    """One scenario stage: its name and its span in seconds from the run's start."""

    name: str
    start_s: float
    end_s: float
    target_rate: float | None = None
    classes: tuple[str, ...] | None = None  # the classes the stage draws from; None: all
