"""Retry-After follow-ups: does the target admit a refused request when it said it would?

Opt-in (`[outcomes] retry_after_follow_ups = N`). A worker follows at most its share of N
refusals that carried Retry-After, at most one new one every SPACING_S (so a burst's
refusals, all answered in the same millisecond, do not all come back in the same
millisecond and refuse each other). A followed refusal's request is sent again exactly when
its Retry-After said (the refusal's end + the value, slept to and spun on like any
scheduled send); refused again with a Retry-After, again when that one says, up to
`attempts` tries; it ends admitted (2xx), refused without a Retry-After, past its tries, or
with the run.

The traffic is kept apart: the tries are never samples, never counted in the live view or
heard by the request source, and never extend the run (pending ones are cut when the run's
own requests have drained). Each try is one line of `retry_after.w<N>.jsonl`, merged by
the analysis into retry_after.parquet and summary.json's `retry_after_follow_up`, which
declares how many extra requests were sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from zqbench.dialects.base import Dialect, RequestSpec
from zqbench.metrics.classify import REFUSAL_STATUSES
from zqbench.samples.follow_up_file import worker_path, write_lines
from zqbench.transport.base import Exchange, HttpRequest, Transport

SPACING_S = 0.1  # the least time between two follow-ups' starts, per worker
MAX_WAIT_S = 60.0  # a Retry-After past this is not followed: the run would end first


@dataclass(frozen=True, slots=True)
class FollowUpSpec:
    """This worker's share of the follow-ups (picklable, in its WorkerSpec)."""

    budget: int  # refusals this worker follows
    attempts: int  # tries per followed refusal


def share(total: int, worker: int, n_workers: int) -> int:
    """Worker `worker`'s part of `total`: as even as can be, the first ones one more."""
    return total // n_workers + (1 if worker < total % n_workers else 0)


class Sender(Protocol):
    """What a follow-up needs of the worker (zqbench.engines.native.NativeWorker)."""

    transport: Transport
    dialect: Dialect
    start_ns: int

    def sleep_until(self, due_abs: int) -> Awaitable[bool]: ...


class FollowUps:
    """One worker's follow-ups: which refusals to follow, the tries, and their file."""

    def __init__(
        self,
        spec: FollowUpSpec,
        worker: int,
        out_dir: Path,
        timeout_s: float,
        now_ns: Callable[[], int],
    ) -> None:
        self.spec = spec
        self.worker = worker
        self.path = worker_path(out_dir, worker)
        self.timeout_s = timeout_s
        self.now_ns = now_ns
        self.started = 0
        self._last_start_ns: int | None = None
        self.records: list[dict[str, Any]] = []

    def wants(self, status: int, retry_after_s: float | None) -> bool:
        """Follow this answer? A refusal with a usable Retry-After, budget and spacing left."""
        if self.started >= self.spec.budget or status not in REFUSAL_STATUSES:
            return False
        if retry_after_s is None or not 0 <= retry_after_s <= MAX_WAIT_S:
            return False
        now = self.now_ns()
        if self._last_start_ns is not None and now - self._last_start_ns < SPACING_S * 1e9:
            return False
        self._last_start_ns = now
        self.started += 1
        return True

    async def follow(
        self,
        sender: Sender,
        request: HttpRequest,
        rspec: RequestSpec,
        request_id: int,
        t_refused_abs: int,
        retry_after_s: float,
    ) -> None:
        """Try again at each Retry-After until admitted, refused without one, or out of tries.
        Each try has its own id, so a server's logs tell a try from the request it follows."""
        headers = tuple(h for h in request.headers if h[0] != "x-request-id")
        t_prev, wait_s = t_refused_abs, retry_after_s
        for attempt in range(1, self.spec.attempts + 1):
            due = t_prev + int(wait_s * 1e9)
            record: dict[str, Any] = {
                "request_id": request_id,
                "worker": self.worker,
                "attempt": attempt,
                "t_refused": t_refused_abs - sender.start_ns,
                "t_due": due - sender.start_ns,
                "t_send": None,
                "t_end": None,
                "status": 0,
                "error": None,
                "retry_after_s": None,
            }
            self.records.append(record)
            try:
                if not await sender.sleep_until(due):
                    record["error"] = "stopped"
                    return
                tag = ("x-request-id", f"zq-{request_id}-retry{attempt}")
                tagged = HttpRequest(request.method, request.path, (*headers, tag), request.body)
                parser, exchange = sender.dialect.parser(rspec), Exchange()
                summary = parser.summary
                try:
                    await sender.transport.send(tagged, parser, self.timeout_s, exchange)
                finally:
                    t_end = exchange.t_end or self.now_ns()
                    failed = exchange.error
                    record.update(
                        t_send=exchange.t_send - sender.start_ns if exchange.t_send else None,
                        t_end=t_end - sender.start_ns,
                        status=summary.status,
                        retry_after_s=summary.retry_after_s,
                        error=summary.error if failed is None else failed.error_class,
                    )
            except asyncio.CancelledError:
                record["error"] = "ended_with_run"
                raise
            status, answer_ra = summary.status, summary.retry_after_s
            if 200 <= status < 300 or status not in REFUSAL_STATUSES:
                return  # admitted, or an answer that is not a refusal: nothing to wait for
            if answer_ra is None or not 0 <= answer_ra <= MAX_WAIT_S:
                return
            t_prev, wait_s = t_end, answer_ra

    def write(self) -> None:
        """The tries, one JSON object a line (none: no file)."""
        if self.records:
            write_lines(self.path, self.records)
