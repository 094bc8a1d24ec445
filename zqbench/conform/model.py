"""What a conformance run is made of: options, checks, results and the report.

A check is a small object with a stable `id` (`zeroqueue.3`), the `group` it belongs to
(`zeroqueue`), a one-line `statement` of what must hold, and `run(ctx) -> CheckResult`.
A result is `pass`, `fail` or `skip`; a fail carries the evidence that shows why, a skip
the reason it could not be decided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from zqbench.conform.context import Context

Status = Literal["pass", "fail", "skip"]
APIS = ("anthropic", "openai")


@dataclass(frozen=True, slots=True)
class CheckResult:
    status: Status
    reason: str = ""  # one line: why it failed or was skipped (or what passed)
    evidence: dict[str, Any] = field(default_factory=dict)


def passed(reason: str = "", **evidence: Any) -> CheckResult:
    return CheckResult("pass", reason, evidence)


def failed(reason: str, **evidence: Any) -> CheckResult:
    return CheckResult("fail", reason, evidence)


def skipped(reason: str, **evidence: Any) -> CheckResult:
    return CheckResult("skip", reason, evidence)


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    statement: str
    run: Callable[[Context], CheckResult]

    @property
    def group(self) -> str:
        """`api.anthropic.3` -> `api.anthropic`; `errors.2` -> `errors`."""
        return self.id.rpartition(".")[0]


@dataclass(frozen=True, slots=True)
class ConformOptions:
    """Everything a run needs; the CLI fills it from flags, tests build it directly.

    Load bounds keep every check under about 10 s and 200 requests on a local endpoint.
    """

    target: str
    apis: tuple[str, ...] = ("anthropic",)  # the first one drives errors.* and zeroqueue.*
    model: str | None = None  # None: the first id of GET /v1/models
    api_key: str | None = None  # never written to any output
    expect_auth: bool = False  # errors.6: a request without the key must get 401
    expect_http2: bool = False  # http.2 fails (not skips) when HTTP/2 does not work
    expect_headers: tuple[str, ...] = ()  # 'NAME=VALUE' or 'NAME~REGEX'
    only: tuple[str, ...] = ()  # groups (or group prefixes: `api`, `zeroqueue`)
    skip: tuple[str, ...] = ()  # check ids
    timeout_s: float = 10.0  # per request
    max_tokens: int = 8  # api.* and errors.* requests
    body_limit_bytes: int = 32 * 1024 * 1024  # errors.4 sends a body past this
    low_load_requests: int = 30  # zeroqueue.1-3: sequential requests
    server_queue_bound_ms: float = 5.0  # zeroqueue.3: p99 at low load (scheduler noise < 5 ms)
    slope_steps: tuple[int, ...] = (1, 2, 4, 8, 16)  # zeroqueue.5: concurrency per step
    slope_rounds: int = 3  # zeroqueue.5: bursts per step
    slope_max_tokens: int = 64
    slope_tolerance_ms: float = 3.0  # zeroqueue.5: ms of TTFT per added concurrent request
    overload_concurrency: int = 32  # zeroqueue.6-9: one burst of this many requests
    overload_max_tokens: int = 64
    refusal_bound_ms: float = 100.0  # zeroqueue.8: time_to_reject p99
    recovery_s: float = 2.0  # zeroqueue.10: refusals must stop within this after the burst
    recovery_requests: int = 5  # zeroqueue.10: consecutive admissions that prove recovery
    check_time_s: float = 10.0  # wall-clock bound of each load measurement
    seed: int = 0  # bootstrap RNG

    def __repr__(self) -> str:  # the key never reaches a log or traceback
        key = "<redacted>" if self.api_key else None
        return f"ConformOptions(target={self.target!r}, apis={self.apis!r}, api_key={key})"

    def validate(self) -> None:
        """Raise ValueError for values no run could use (the CLI turns it into exit 2)."""
        if not self.apis or any(a not in APIS for a in self.apis):
            raise ValueError(f"apis must be among {', '.join(APIS)}")
        positive = {
            "timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
            "low_load_requests": self.low_load_requests,
            "slope_rounds": self.slope_rounds,
            "slope_max_tokens": self.slope_max_tokens,
            "overload_concurrency": self.overload_concurrency,
            "overload_max_tokens": self.overload_max_tokens,
            "recovery_requests": self.recovery_requests,
            "check_time_s": self.check_time_s,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if len(self.slope_steps) < 2 or any(c < 1 for c in self.slope_steps):
            raise ValueError("slope_steps needs at least two concurrencies >= 1")


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check's line in the report."""

    id: str
    group: str
    statement: str
    status: Status
    reason: str
    evidence: dict[str, Any]
    duration_s: float


@dataclass(frozen=True, slots=True)
class ConformReport:
    target: str  # without credentials
    apis: tuple[str, ...]
    model: str
    started_at: str  # UTC ISO 8601
    duration_s: float
    outcomes: tuple[CheckOutcome, ...]
    options: dict[str, Any]  # the bounds and thresholds the run used

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def ok(self) -> bool:
        return self.count("fail") == 0

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1
