"""What a conformance run is asked to do: `ConformOptions`, validated when it is built.

A value no run could use raises `OptionError` naming the field (`timeout_s -1: must be
positive`); the CLI shows the same problem under its flag's name. The helpers below turn the
CLI's text values (a comma list, an environment variable's name, a header expectation) into
the typed fields, with the same errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from zqbench.dialects import DEFAULT_API, DIALECTS
from zqbench.errors import OptionError

DURATION_FLOOR_S = 600.0  # a healthy run takes seconds locally, a minute or two on a CPU engine
DURATION_TIMEOUTS = 60  # --timeouts a run may spend in all


@dataclass(frozen=True, slots=True)
class ConformOptions:
    """Everything a run needs; the CLI fills it from flags, tests build it directly.

    Load bounds keep each load measurement (one zeroqueue.5 step, the overload burst)
    under about `check_time_s` and 200 requests on a local endpoint.
    """

    target: str
    # The first one drives errors.* and zeroqueue.*; (): every API that answers, anthropic
    # first (zqbench.target.resolve detects them).
    apis: tuple[str, ...] = (DEFAULT_API,)
    model: str | None = None  # None: the one GET /v1/models lists (zqbench.target.resolve)
    strict_model: bool = False  # no model named and several listed: fail, not the first
    api_key: str | None = None  # never written to any output
    expect_auth: bool = False  # errors.6: a request without the key must get 401
    expect_http2: bool = False  # http.2 fails (not skips) when HTTP/2 does not work
    expect_headers: tuple[str, ...] = ()  # 'NAME=VALUE' or 'NAME~REGEX'
    # zeroqueue.1-4 fail (not skip) on a target without the reference server's instrumentation
    require_instrumentation: bool = False
    only: tuple[str, ...] = ()  # groups (or group prefixes: `api`, `zeroqueue`)
    skip: tuple[str, ...] = ()  # check ids
    timeout_s: float = 10.0  # per request
    max_tokens: int = 8  # api.* and errors.* requests
    body_limit_bytes: int = 32 * 1024 * 1024  # errors.4 sends a body past this
    low_load_requests: int = 30  # zeroqueue.1-3: sequential requests
    server_queue_bound_ms: float = 5.0  # zeroqueue.3: p99 at low load (scheduler noise < 5 ms)
    # zeroqueue.5: concurrency per step, extended to 2x the capacity when it is known. 32 is
    # past the small capacities common on one CPU or a small GPU (vLLM --max-num-seqs 8, 16).
    slope_steps: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    slope_rounds: int = 3  # zeroqueue.5: bursts per step
    slope_max_tokens: int = 64  # a queue's wait is this many tokens' service time
    queue_margin_ms: float = 20.0  # zeroqueue.5: the threshold's least margin (queueing.py)
    queue_share: float = 0.10  # zeroqueue.5: fail when a step's waited share CI low is above
    overload_concurrency: int = 32  # zeroqueue.6-9: one burst of this many requests
    overload_max_tokens: int = 64
    refusal_bound_ms: float = 100.0  # zeroqueue.8: time_to_reject p99
    recovery_s: float = 2.0  # zeroqueue.10: refusals must stop within this after the burst
    recovery_requests: int = 5  # zeroqueue.10: consecutive admissions that prove recovery
    # zeroqueue.11: fail when more than this share of the refusals under load came with a
    # slot free (any at rest fails). Not 0: a server may free a slot more than the 20 ms
    # grace after its last byte now and then (a busy machine); one in 20 is a rule.
    false_refusal_share: float = 0.05
    # zeroqueue.12: fail when fewer than this share of the retries sent when Retry-After said
    # were admitted. Not 1: retries due together race for the slots a burst left, and one
    # may meet a slot freed a moment late; one in four lost is a value that misleads.
    retry_share: float = 0.75
    # zeroqueue.13: the cut streams ask for this many tokens, so a server that kept
    # generating them would hold its slots well past the bound (1.8 s on the reference
    # server's sim engine, several seconds on vLLM's CPU build).
    disconnect_max_tokens: int = 1024
    disconnect_bound_s: float = 1.0  # zeroqueue.13: slots free again within this of a hang-up
    check_time_s: float = 10.0  # wall-clock bound of each load measurement
    # At most this long waiting for the endpoint to be at rest before the at-rest requests and
    # the slope steps (phases.settle); a one-core llama.cpp tokenizing errors.4's 32 MiB
    # prompt took 20-50 s.
    settle_s: float = 60.0
    seed: int = 0  # bootstrap RNG
    # The whole run's bound, seconds (None: DURATION_TIMEOUTS x timeout_s, at least
    # DURATION_FLOOR_S): a target that hangs one request in two never stops answering, and
    # each hung request waits out --timeout (conform.hung).
    max_duration_s: float | None = None

    @property
    def duration_bound_s(self) -> float:
        """No request of the run starts later than this after it began."""
        if self.max_duration_s is not None:
            return self.max_duration_s
        return max(DURATION_FLOOR_S, DURATION_TIMEOUTS * self.timeout_s)

    def __repr__(self) -> str:  # the key never reaches a log or traceback
        key = "<redacted>" if self.api_key else None
        return f"ConformOptions(target={self.target!r}, apis={self.apis!r}, api_key={key})"

    def __post_init__(self) -> None:
        if any(a not in DIALECTS for a in self.apis):
            raise OptionError(
                "apis", f"must be among {', '.join(DIALECTS)}", value=",".join(self.apis)
            )
        positive = {
            "timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
            "low_load_requests": self.low_load_requests,
            "slope_rounds": self.slope_rounds,
            "slope_max_tokens": self.slope_max_tokens,
            "overload_concurrency": self.overload_concurrency,
            "overload_max_tokens": self.overload_max_tokens,
            "recovery_requests": self.recovery_requests,
            "disconnect_max_tokens": self.disconnect_max_tokens,
            "disconnect_bound_s": self.disconnect_bound_s,
            "check_time_s": self.check_time_s,
            "max_duration_s": 1 if self.max_duration_s is None else self.max_duration_s,
        }
        for name, value in positive.items():
            if value <= 0:
                raise OptionError(name, "must be positive", value=str(value))
        if self.queue_margin_ms < 0:
            raise OptionError("queue_margin_ms", "must be >= 0", value=str(self.queue_margin_ms))
        if not 0 <= self.queue_share < 1:
            raise OptionError("queue_share", "must be in [0, 1)", value=str(self.queue_share))
        for name in ("false_refusal_share", "retry_share"):
            share = getattr(self, name)
            if not 0 <= share <= 1:
                raise OptionError(name, "must be in [0, 1]", value=str(share))
        if len(self.slope_steps) < 2 or any(c < 1 for c in self.slope_steps):
            steps = ",".join(str(c) for c in self.slope_steps)
            raise OptionError("slope_steps", "needs at least two concurrencies >= 1", value=steps)
        for spec in self.expect_headers:
            parse_expectation(spec)


@dataclass(frozen=True, slots=True)
class Expectation:
    """One `--expect-header`: the header must be present, with that value or matching."""

    spec: str
    name: str  # lower case
    value: str | None = None
    pattern: re.Pattern[str] | None = None

    def problem(self, headers: dict[str, str]) -> str | None:
        got = headers.get(self.name)
        if got is None:
            return f"{self.name} is absent"
        if self.value is not None and got != self.value:
            return f"{self.name} is {got[:80]!r}, expected {self.value!r}"
        if self.pattern is not None and not self.pattern.search(got):
            return f"{self.name} is {got[:80]!r}, which does not match {self.pattern.pattern!r}"
        return None


def parse_expectation(spec: str) -> Expectation:
    """'NAME=VALUE' (that exact value) or 'NAME~REGEX' (re.search matches the value)."""
    i_eq, i_re = spec.find("="), spec.find("~")
    cuts = [i for i in (i_eq, i_re) if i > 0]
    if not cuts:
        raise OptionError("expect_headers", "use 'NAME=VALUE' or 'NAME~REGEX'", value=repr(spec))
    cut = min(cuts)
    name = spec[:cut].strip().lower()
    rest = spec[cut + 1 :]
    if not name or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9a-z-]+", name):
        raise OptionError("expect_headers", f"{name!r} is not a header name", value=repr(spec))
    if spec[cut] == "=":
        return Expectation(spec, name, value=rest.strip())
    try:
        return Expectation(spec, name, pattern=re.compile(rest))
    except re.error as e:
        raise OptionError(
            "expect_headers", f"bad regular expression: {e}", value=repr(spec)
        ) from None


def parse_steps(text: str) -> tuple[int, ...]:
    """`slope_steps` from a comma list: `1,2,4,8,16,32`."""
    try:
        return tuple(int(s) for s in text.split(","))
    except ValueError:
        raise OptionError("slope_steps", "integers, comma-separated", value=repr(text)) from None
