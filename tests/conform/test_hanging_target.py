"""#44 item 7: conform against a target whose /health answers but whose generations hang
(never answered, or a head and never a byte more) ran every check into its timeout: 331
requests and 91 s at --timeout 1, about ten times that at the default 10 s. Once the
requests in a row time out, and one more confirms it, conform ends: the first check left
fails with the reason, the others that needed a phase not measured skip pointing to it. The
server counts what it got.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conform.fake_server import PATHS, FakeServer
from zqbench.conform.hung import HUNG_STREAK
from zqbench.conform.options import ConformOptions
from zqbench.conform.runner import run_conformance
from zqbench.errors import OptionError

RESOLVE_POSTS = 2  # the target resolver's one request per API, answered


class Hanging(FakeServer):
    """Answers /health, the model list and the resolver's checks; then every generation
    hangs: no answer at all, or (`head`) a 200 stream's head and never a byte more."""

    def __init__(self, head: bool) -> None:
        super().__init__()
        self.head, self.posts = head, 0

    async def _handle(self, w: Any, method: str, path: str, *rest: Any) -> bool:
        if path in PATHS and method == "POST":
            self.posts += 1
            if self.posts > RESOLVE_POSTS:
                if self.head:
                    self._sse_head(w, [])
                    await w.drain()
                await asyncio.Event().wait()  # until the server shuts down
        return await super()._handle(w, method, path, *rest)


@pytest.mark.parametrize("head", [False, True])
def test_conform_ends_once_the_target_stops_answering(head: bool) -> None:
    with Hanging(head) as server:
        options = ConformOptions(target=server.base_url, apis=(), timeout_s=0.5, check_time_s=1.0)
        report = run_conformance(options)
        posts = server.posts
    # The at-rest requests (2 or 3 in check_time_s), the checks until HUNG_STREAK timed
    # out in a row, and the one that confirmed it: 4 hung requests whichever way.
    assert posts == RESOLVE_POSTS + HUNG_STREAK + 1
    # The plan stops measuring there: the first check that needed a phase it never measured
    # fails with the reason, the others that needed one skip pointing to it, and a check
    # judged on what was measured before (the at-rest requests, the headers seen) keeps
    # its own verdict.
    stopped = [o for o in report.outcomes if o.evidence == {"stopped_answering": True}]
    assert len(stopped) == 1 and stopped[0].status == "fail"
    assert stopped[0].reason == (
        "the target stopped answering: the last 4 requests got no answer within --timeout "
        "0.5 s; the checks after this one were not run"
    )
    pointing = f"not run: the target stopped answering (see {stopped[0].id})"
    later = report.outcomes[report.outcomes.index(stopped[0]) + 1 :]
    assert any(o.reason == pointing for o in later)
    assert all(o.status == "skip" for o in later if o.reason == pointing)
    assert report.exit_code == 1


class HangingEveryOther(FakeServer):
    """Answers /health, the model list and the resolver's checks; then every other
    generation hangs: never three timeouts in a row, so the target never 'stopped
    answering', and each hung request waits out --timeout (at --timeout 1 the whole run
    took 183 s; at the default 10 s, half an hour)."""

    def __init__(self) -> None:
        super().__init__()
        self.posts = 0

    async def _handle(self, w: Any, method: str, path: str, *rest: Any) -> bool:
        if path in PATHS and method == "POST":
            self.posts += 1
            if self.posts > RESOLVE_POSTS and self.posts % 2:
                await asyncio.Event().wait()  # until the server shuts down
        return await super()._handle(w, method, path, *rest)


def test_the_whole_conform_run_is_bounded_whatever_the_target_answers() -> None:
    bound_s, timeout_s = 4.0, 0.5
    with HangingEveryOther() as server:
        options = ConformOptions(
            target=server.base_url,
            apis=(),
            timeout_s=timeout_s,
            check_time_s=1.0,
            max_duration_s=bound_s,
        )
        t0 = time.monotonic()
        report = run_conformance(options)
        elapsed = time.monotonic() - t0
    # No request starts past the bound; the last one started may take its --timeout (a
    # burst's requests together), and judging takes a moment.
    assert elapsed < bound_s + 2 * timeout_s + 1.0
    out_of_time = [o for o in report.outcomes if o.evidence == {"out_of_time": True}]
    assert len(out_of_time) == 1 and out_of_time[0].status == "fail"
    assert out_of_time[0].reason == (
        "conform ran out of time: the run's bound of 4 s (--timeout 0.5 s a request) passed "
        "before this check was measured; the checks after this one were not run"
    )
    pointing = f"not run: conform ran out of time (see {out_of_time[0].id})"
    later = report.outcomes[report.outcomes.index(out_of_time[0]) + 1 :]
    assert any(o.reason == pointing for o in later)
    assert all(o.status == "skip" for o in later if o.reason == pointing)
    assert report.exit_code == 1


def test_the_bound_of_a_conform_run_follows_its_timeout() -> None:
    assert ConformOptions(target="http://x").duration_bound_s == 600.0
    assert ConformOptions(target="http://x", timeout_s=30).duration_bound_s == 1800.0
    assert ConformOptions(target="http://x", max_duration_s=5).duration_bound_s == 5.0
    with pytest.raises(OptionError) as e:
        ConformOptions(target="http://x", max_duration_s=0)
    assert str(e.value.problem) == "must be positive"
