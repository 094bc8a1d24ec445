"""One request's life in the engine: a small state machine shared by two threads.

States: WAITING (fifo queue) -> ADMITTED (holds a slot, not yet computed) ->
RUNNING (prefilled, decoding) -> FINISHED; or REJECTED (fifo queue timeout,
shutdown) and ABORTED (client went away). The asyncio side creates it; the
engine thread alone advances it and reports to the handler through `post`,
which hands events to the event loop with `call_soon_threadsafe`.

Events the handler receives, in order:
    ("start", None)            compute began; dispatch/start times are set
    ("thinking", str)          a thinking token's text (the first `thinking_tokens`)
    ("text", str)              generated text, stop sequences held back
    ("tool", str)              a token of the tool call's arguments (JSON text)
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
from reference_server.output_plan import ToolCall
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
        self.thinking_tokens = 0  # the first tokens are thinking (output_plan.py)
        self.thinking_shown = True  # False: display "omitted", only the signature is sent
        self.tool: ToolCall | None = None  # then a tool call's arguments instead of text
        self.thinking = ""  # thinking text (one char per token)
        self.tool_args = ""  # the tool call's arguments, JSON (one char per token)
        self.text = ""  # all generated answer text (one char per token)
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

    def append_token(self, token: int) -> tuple[bool, str, str]:
        """Record one generated token: whether the sequence is done, and the event it
        gives (its kind and text; answer text held back while it may become a stop
        sequence)."""
        i = self.output_tokens  # this token's place in the output
        self.output_tokens += 1
        done = self.output_tokens >= self.max_tokens
        if i < self.thinking_tokens:
            kind, piece = "thinking", tokenizer.decode_token(token)
            self.thinking += piece
        elif self.tool is not None:
            room = self.max_tokens - self.thinking_tokens
            token = self.tool.token_at(i - self.thinking_tokens, room, token)
            kind, piece = "tool", tokenizer.decode_token(token)
            self.tool_args += piece
            if len(self.tool_args) == self.tool.length(room):
                self.stop_reason = "tool_use"
                done = True
        else:
            kind = "text"
            self.text += tokenizer.decode_token(token)
            for s in self.stop:
                if self.text.endswith(s):
                    self.text = self.text[: -len(s)]
                    self.stop_reason, self.stop_sequence = "stop_sequence", s
                    done = True
                    break
            piece = self.pending_text(final=done)
        self.last_token = token
        if done and self.stop_reason is None:
            self.stop_reason = "max_tokens"
        return done, kind, piece

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
