"""A target that stopped answering (its /health up, its generations hanging, or a head and
never a byte more) would hold every later request for its whole --timeout, one check after
another (#44 item 7: 331 requests, 91 s at --timeout 1). Between measurements, the runner
asks `stopped_answering`: when the last HUNG_STREAK exchanges timed out and one more request
(a short generation) does too, the rest is not sent. The confirmation keeps a queue still draining
after a burst, whose burst timed out but which answers a request alone, from counting.

A target that hangs one request in two never makes such a streak, and each hung request
still waits out --timeout (183 s at --timeout 1, half an hour at the default). So the whole
run is bounded too (`ConformOptions.duration_bound_s`): past it, the sender sends nothing
more (`OutOfTime`), and the checks not yet measured are not run, as when the target stopped
answering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zqbench.conform.context import Sender

HUNG_STREAK = 3
STOPPED = "the target stopped answering"
OUT_OF_TIME = "conform ran out of time"


class OutOfTime(Exception):
    """Raised by the sender for a request the run's bound leaves no time for; its message
    is the reason the checks not yet measured are not run."""

    def __init__(self, bound_s: float, timeout_s: float) -> None:
        super().__init__(
            f"{OUT_OF_TIME}: the run's bound of {bound_s:g} s (--timeout {timeout_s:g} s a "
            "request) passed before this check was measured; the checks after this one were "
            "not run"
        )


def stopped_answering(sender: Sender) -> str | None:
    """Why the checks not yet run are not sent (the first of them fails with it); None:
    the target still answers. Judged on every exchange so far (`sender.seen`, in order),
    confirmed by one short generation."""
    t = sender.target
    tail = sender.seen[-HUNG_STREAK:]
    if len(tail) < HUNG_STREAK or any(ex.error != "timeout" for ex in tail):
        return None
    if sender.send(t.generate(t.api, stream=True, max_tokens=1)).error != "timeout":
        return None
    return (
        f"{STOPPED}: the last {HUNG_STREAK + 1} requests got no answer "
        f"within --timeout {t.options.timeout_s:g} s; the checks after this one were not run"
    )


def not_run(failed_check: str, reason: str) -> str:
    """The reason of each check after the one that failed with `reason` (`stopped_answering`'s
    or `OutOfTime`'s)."""
    return f"not run: {_kind(reason)} (see {failed_check})"


def evidence(reason: str) -> dict[str, bool]:
    """The evidence of the check that failed with `reason`."""
    return {"out_of_time" if _kind(reason) == OUT_OF_TIME else "stopped_answering": True}


def _kind(reason: str) -> str:
    return OUT_OF_TIME if reason.startswith(OUT_OF_TIME) else STOPPED
