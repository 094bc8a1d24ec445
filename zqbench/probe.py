"""`zqbench probe`: the five-minute check of whether an endpoint queues.

Sequential requests, one at a time, each with a curl-style breakdown (DNS,
connect, TLS, TTFB, total). With no concurrency a server has nothing to queue, so
a P99/P50 ratio far above 1 here points at the server's own jitter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from zqbench.control import check_reachable
from zqbench.dialects import get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec
from zqbench.errors import TargetError
from zqbench.option_values import ApiChoice, check_at_least, parse_headers, read_api_key
from zqbench.prompts import synth_prompt
from zqbench.redact import redact_url
from zqbench.resolve import TIMEOUT_S as RESOLVE_TIMEOUT_S
from zqbench.resolve import Access, Resolution, Wanted, resolve_target
from zqbench.transport.base import ConnectError
from zqbench.transport.probe import ProbeResult, probe


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """The probe's options, checked when built; the names are `zqbench probe`'s parameters."""

    target: str
    n: int = 100
    api: ApiChoice = ApiChoice.auto  # auto: detected (zqbench.resolve)
    model: str | None = None  # None: the one GET /v1/models lists
    strict_model: bool = False  # no model named and several listed: fail, not the first
    max_tokens: int = 16
    prompt_tokens: int = 32
    api_key_env: str | None = None
    headers: tuple[str, ...] = ()
    http2: bool = False
    fresh_connections: bool = False
    stream: bool = True
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "api", ApiChoice.parse(self.api, "api"))
        check_at_least("n", self.n, 1)
        parse_headers(self.headers)
        read_api_key(self.api_key_env)


@dataclass(frozen=True, slots=True)
class PhaseStats:
    name: str
    n: int  # requests where the phase happened (a reused connection has no connect)
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


@dataclass(frozen=True, slots=True)
class ProbeReport:
    target: str
    n: int
    ok_count: int
    statuses: dict[str, int]
    phases: tuple[PhaseStats, ...]
    ratio_p99_p50: float | None

    @property
    def ok(self) -> bool:
        return self.ok_count == self.n


def _rank(sorted_values: list[float], q: float) -> float:
    """Nearest-rank order statistic: the value at rank ceil(q*n), 1-based."""
    return sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1]


def _phase(name: str, values_ns: list[int | None]) -> PhaseStats:
    values = sorted(v / 1e6 for v in values_ns if v is not None)
    if not values:
        return PhaseStats(name, 0, None, None, None)
    return PhaseStats(name, len(values), _rank(values, 0.5), _rank(values, 0.99), values[-1])


def resolve(options: ProbeOptions) -> Resolution:
    """The target reachable, its model and API resolved as a run resolves them."""
    base_url = options.target.rstrip("/")
    check_reachable(base_url, timeout_s=min(options.timeout_s, 5.0))
    named = options.api.api()
    access = Access(
        base_url,
        api_key=read_api_key(options.api_key_env),
        extra_headers=parse_headers(options.headers),
        timeout_s=min(options.timeout_s, RESOLVE_TIMEOUT_S),
    )
    wanted = Wanted(
        model=options.model,
        apis=() if named is None else (named.value,),
        strict_model=options.strict_model,
    )
    return resolve_target(access, wanted)


def run_probe(
    options: ProbeOptions, *, on_note: Callable[[str], None] | None = None
) -> ProbeReport:
    """`on_note` gets the resolved target's lines (model, API) before the first request."""
    resolution = resolve(options)
    if on_note is not None:
        for line in (f"target: {resolution.record.describe()}", *resolution.notes):
            on_note(line)
    config = DialectConfig(
        model=resolution.model,
        api_key=read_api_key(options.api_key_env),
        extra_headers=parse_headers(options.headers),
    )
    dialect = get_dialect(resolution.api, config)
    spec = RequestSpec(
        request_class="probe",
        prompt=synth_prompt(max(1, options.prompt_tokens), seed=0),
        max_tokens=options.max_tokens,
        stream=options.stream,
    )
    try:
        results: list[ProbeResult] = probe(
            options.target.rstrip("/"),
            dialect.build(spec),
            options.n,
            http2=options.http2,
            timeout_s=options.timeout_s,
            fresh_connections=options.fresh_connections,
        )
    except ConnectError as exc:
        raise TargetError(str(exc)) from None
    ok = [r for r in results if r.error is None and 200 <= r.status < 300]
    phases = (
        _phase("dns", [r.dns_ns for r in ok]),
        _phase("connect", [r.connect_ns for r in ok]),
        _phase("tls", [r.tls_ns for r in ok]),
        _phase("ttfb", [r.ttfb_ns for r in ok]),
        _phase("total", [r.total_ns for r in ok]),
    )
    total = phases[-1]
    ratio = None
    if total.p50_ms and total.p99_ms is not None:
        ratio = total.p99_ms / total.p50_ms
    return ProbeReport(
        target=redact_url(options.target),
        n=len(results),
        ok_count=len(ok),
        statuses=_statuses(results),
        phases=phases,
        ratio_p99_p50=ratio,
    )


def _statuses(results: list[ProbeResult]) -> dict[str, int]:
    """How many requests ended with each HTTP status, or each transport error."""
    statuses: dict[str, int] = {}
    for r in results:
        key = str(r.status) if r.error is None or r.status else f"transport:{r.error}"
        statuses[key] = statuses.get(key, 0) + 1
    return statuses


def format_probe(report: ProbeReport) -> str:
    def ms(v: float | None) -> str:
        return f"{'-':>9}" if v is None else f"{v:9.3f}"

    lines = [
        f"probe {report.target}: {report.n} sequential requests, {report.ok_count} ok",
        f"{'phase':<8} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}",
    ]
    for p in report.phases:
        lines.append(f"{p.name:<8} {p.n:>5} {ms(p.p50_ms)} {ms(p.p99_ms)} {ms(p.max_ms)}")
    ratio = "-" if report.ratio_p99_p50 is None else f"{report.ratio_p99_p50:.2f}"
    lines.append(f"total p99/p50 = {ratio}")
    lines.append("status: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.statuses.items())))
    return "\n".join(lines)
