"""The report's optional sections: the one list, in the order the pages show them.

    for section in SECTIONS: ...   # summarize, build_view, both templates, the terminal

A section is one module here (`SECTION`, a base.Section: how it is computed from the run's
frame, its terminal lines, what its partials lay out and the filters they use) and two
partials, outputs/templates/sections/<name>.html.j2 and <name>.md.j2. Its model is
summary.json's `Summary.<name>`: zqbench/summary.py keeps the whole versioned format, and
the schema generated from it, in one bottom-layer module. tests/metrics/test_sections.py
proves every optional field of Summary is a section or named in SHOWN_ELSEWHERE.
"""

from __future__ import annotations

from zqbench.metrics.sections import (
    connection_wait,
    cut_at_end,
    distributed,
    outcomes,
    packet_loss,
    prefix_cache,
    profile,
    reasoning,
    resent,
    server_queue,
    sessions,
    stop,
    ttft_split,
)
from zqbench.metrics.sections.base import Section

# Summary's optional fields that are no section of their own, and where the pages show them.
SHOWN_ELSEWHERE = {
    "target_resolution": "the headline's `target:` line",
    "retry_after_follow_up": "a sentence of the Refusals part (outputs/view.py)",
}
SECTIONS: tuple[Section, ...] = (
    stop.SECTION,
    cut_at_end.SECTION,
    resent.SECTION,
    connection_wait.SECTION,
    ttft_split.SECTION,
    reasoning.SECTION,
    server_queue.SECTION,
    prefix_cache.SECTION,
    packet_loss.SECTION,
    profile.SECTION,
    distributed.SECTION,
    sessions.SECTION,
    outcomes.SECTION,
)
