"""A target that stopped answering (its /health up, its generations hanging, or a head and
never a byte more) would hold every later request for its whole --timeout, one check after
another (#44 item 7: 331 requests, 91 s at --timeout 1). Between measurements, the runner
asks `stopped_answering`: when the last HUNG_STREAK exchanges timed out and one more request
(a short generation) does too, the rest is not sent. The confirmation keeps a queue still draining
after a burst, whose burst timed out but which answers a request alone, from counting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zqbench.conform.context import Sender

HUNG_STREAK = 3


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
        f"the target stopped answering: the last {HUNG_STREAK + 1} requests got no answer "
        f"within --timeout {t.options.timeout_s:g} s; the checks after this one were not run"
    )


def not_run(failed_check: str) -> str:
    """The reason of each check after the one that failed with `stopped_answering`'s."""
    return f"not run: the target stopped answering (see {failed_check})"
