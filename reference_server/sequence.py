"""One request's life in the engine: a small state machine shared by two threads.

States: WAITING (fifo queue) -> ADMITTED (holds a slot, not yet computed) ->
RUNNING (prefilled, decoding) -> FINISHED; or REJECTED (fifo queue timeout,
shutdown) and ABORTED (client went away). The asyncio side creates it; the
engine thread alone advances it and reports to the handler through `post`,
which hands events to the event loop with `call_soon_threadsafe`.

Events the handler receives, in order:
    ("start", None)            compute began; dispatch/start times are set
    ("text", str)              generated text, stop sequences held back
    ("end", None)              finished; stop_reason, counts and gpu_ms are set
    ("reject", reason)         never started (fifo queue timeout, shutdown)
    ("error", message)         failed in the engine (this sequence alone), or shut down
    ("abort", None)            dropped because the client went away (Scheduler.abort)
Each sequence gets exactly one of the last four, so its handler always returns.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque

from reference_server.backend import SamplingParams
from reference_server.model import tokenizer
from reference_server.trace import RequestRange


class State(enum.Enum):
    WAITING = "waiting"
    ADMITTED = "admitted"
    RUNNING = "running"
    FINISHED = "finished"
    REJECTED = "rejected"
    ABORTED = "aborted"


PROFILES = ("low-latency", "high-throughput", "long-context")


class Sequence:
    def __init__(
        self,
        request_id: str,
        prompt: list[int],
        max_tokens: int,
        stop: tuple[str, ...],
        params: SamplingParams,
        profile: str,
        received: float,
        received_perf: float,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.request_id = request_id
        self.trace_id = request_id  # the client's x-request-id when it sent one
        self.range: RequestRange | None = None  # admission .. end, on the engine thread
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.stop = tuple(s for s in stop if s)
        self.params = params
        self.profile = profile
        self.received = received  # epoch seconds: request fully read
        self.received_perf = received_perf  # perf_counter twin, for durations
        self.dispatch: float | None = None  # epoch: scheduler handed it to compute
        self.start: float | None = None  # epoch: its first compute step began
        self.slot: int | None = None
        self.state = State.WAITING
        self.aborted = False  # set by Scheduler.abort (asyncio thread); read by the engine
        self.text = ""  # all generated text (one char per token)
        self.emitted = 0  # chars of `text` already posted
        self.output_tokens = 0
        self.cached_tokens = 0  # prompt tokens its prefill took from the prefix cache
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.gpu_ms: float | None = None
        self.last_token = tokenizer.BOS
        self._hold = max((len(s) for s in self.stop), default=1) - 1
        # Handler side: filled on the event loop thread only.
        self._loop = loop
        self.events: deque[tuple[str, str | None]] = deque()
        self.wake = asyncio.Event()

    @property
    def reserved_tokens(self) -> int:
        """KV positions this request may use: admission reserves them all up front."""
        return len(self.prompt) + self.max_tokens

    # ---- engine thread ---------------------------------------------------

    def append_token(self, token: int) -> bool:
        """Record one generated token; returns True when the sequence is done."""
        self.output_tokens += 1
        self.last_token = token
        self.text += tokenizer.decode_token(token)
        for s in self.stop:
            if self.text.endswith(s):
                self.text = self.text[: -len(s)]
                self.stop_reason, self.stop_sequence = "stop_sequence", s
                return True
        if self.output_tokens >= self.max_tokens:
            self.stop_reason = "max_tokens"
            return True
        return False

    def pending_text(self, final: bool) -> str:
        """Text not yet posted; holds back a tail that may still become a stop sequence."""
        end = len(self.text) if final else len(self.text) - self._hold
        if end <= self.emitted:
            return ""
        out = self.text[self.emitted : end]
        self.emitted = end
        return out


def deliver(batch: list[tuple[Sequence, str, str | None]]) -> None:
    """Runs on the event loop: queue each event on its sequence and wake its handler."""
    for seq, kind, data in batch:
        seq.events.append((kind, data))
        seq.wake.set()
