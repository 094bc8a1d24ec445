"""summary.json's `resent` (computed by zqbench.metrics.resent): the requests sent again on
a new connection, in one sentence, in the verdict banner and the terminal."""

from __future__ import annotations

from zqbench import summary as model
from zqbench.metrics.resent import resent
from zqbench.metrics.sections.base import Section


def resent_text(r: model.Resent | None) -> str | None:
    """The requests sent again on a new connection, and why they are not errors."""
    if r is None:
        return None
    many = r.count != 1
    errors = "errors" if many else "error"
    return (
        "The server closed kept-alive connections under requests, before any byte of an "
        f"answer: {r.count:,} request{'s were' if many else ' was'} sent again on a new "
        f"connection (their samples' `resent`), never counted as the server's {errors}, "
        "and zqbench stopped reusing connections to the target for the rest of the run"
    )


SECTION = Section(
    "resent",
    "banner",
    view=lambda s, _: resent_text(s.resent),
    lines=lambda s: [text] if (text := resent_text(s.resent)) else [],
    compute=lambda frame, run: resent(frame),
)
