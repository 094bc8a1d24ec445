"""summary.json's `profile`: the capture of a `zqbench profile` run (zqbench.profile sets
it). The partials lay out the model itself: its numbers are shown as the profiler gave them."""

from __future__ import annotations

from zqbench.metrics.sections.base import Section

SECTION = Section("profile", "body")
