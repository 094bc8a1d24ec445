"""Requests sent again on a new connection: summary.json's `resent`.

llama.cpp's server closes the connection after every streamed response although its head
promised keep-alive; a request written on that connection as the FIN lands dies before any
byte of an answer. The HTTP/1.1 transports send such a request once more on a new
connection (its sample's `resent`) and then stop reusing connections to the target, so a
count of them says why the run's connections were not kept alive, and that none of them
is the server's error.
"""

from __future__ import annotations

import numpy as np

from zqbench import summary as model
from zqbench.metrics.frame import MetricFrame
from zqbench.metrics.sections.base import sentence
from zqbench.summary import RESENT_WHY, Resent


def resent(frame: MetricFrame) -> Resent | None:
    """None when no request was sent again (or the samples predate the column)."""
    count = int(np.count_nonzero(frame.resent))
    return Resent(count=count, why=RESENT_WHY) if count else None


def resent_text(r: model.Resent) -> str:
    """The requests sent again on a new connection, and why they are not errors."""
    many = r.count != 1
    errors = "errors" if many else "error"
    return (
        "The server closed kept-alive connections under requests, before any byte of an "
        f"answer: {r.count:,} request{'s were' if many else ' was'} sent again on a new "
        f"connection (their samples' `resent`), never counted as the server's {errors}, "
        "and zqbench stopped reusing connections to the target for the rest of the run"
    )


SECTION = sentence("resent", resent_text, lambda frame, run: resent(frame))
