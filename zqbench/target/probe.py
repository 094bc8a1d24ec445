"""`zqbench probe`: the five-minute check of whether an endpoint queues.

Sequential requests, one at a time, each with a curl-style breakdown (DNS, connect, TLS,
TTFB, TTFT, total). With no concurrency a server has nothing to queue, so a P99/P50 ratio
far above 1 here points at the server's own jitter, or at other clients' load.

TTFT is read from the body by the dialect's parser, as `zqbench run` reads it: the first
token event of a streamed response, or the arrival of a non-streamed body. It is not TTFB:
a server may send its headers at once and let the request wait in its queue before the
first token (vLLM does: TTFB p99 17 ms beside TTFT p99 9.3 s). So the P99/P50 ratio is taken
over TTFT, where a queue shows, and names its phase; over total when no request had a TTFT.

A 2xx response whose body the parser finds broken (an error event inside the stream, a cut
stream) is not ok: it counts under `<status>:<error>`, as in a run's status mix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zqbench.dialects import get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec, StreamParser
from zqbench.errors import TargetError
from zqbench.metrics.quantiles import rank
from zqbench.option_values import (
    ApiChoice,
    check_above,
    check_at_least,
    parse_headers,
    read_api_key,
)
from zqbench.redact import redact_url
from zqbench.sources.prompts import synth_prompt
from zqbench.target.control import check_reachable
from zqbench.target.resolve import TIMEOUT_S as RESOLVE_TIMEOUT_S
from zqbench.target.resolve import Access, Resolution, Wanted, resolve_target
from zqbench.transport.base import ConnectError
from zqbench.transport.httpx_timed import ProbeResult, probe


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """The probe's options, checked when built; the names are `zqbench probe`'s parameters."""

    target: str
    n: int = 100
    api: ApiChoice = ApiChoice.auto  # auto: detected (zqbench.target.resolve)
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
        check_above("timeout_s", self.timeout_s, 0)
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
    phases: tuple[PhaseStats, ...]  # dns, connect, tls, ttfb, ttft, total
    ratio_p99_p50: float | None
    ratio_phase: str  # the phase the ratio is taken over: ttft, or total without TTFTs
    output_tokens_p50: int | None  # per ok request; from usage when the server reported it
    tokens_from_usage: bool  # every ok request's count came from its usage

    @property
    def ok(self) -> bool:
        return self.ok_count == self.n


def _rank(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank order statistic, as every other percentile of zqbench."""
    return sorted_values[rank(q, len(sorted_values)) - 1]


def _phase(name: str, values_ns: list[int | None]) -> PhaseStats:
    values = sorted(v / 1e6 for v in values_ns if v is not None)
    if not values:
        return PhaseStats(name, 0, None, None, None)
    return PhaseStats(name, len(values), _rank(values, 0.5), _rank(values, 0.99), values[-1])


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """One probe request: what the transport timed and what the parser read."""

    timed: ProbeResult
    read: StreamParser

    @property
    def error(self) -> str | None:
        """The transport's failure first, then the parser's (http_<code> included)."""
        return self.timed.error or self.read.summary.error

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.timed.status < 300

    @property
    def ttft_ns(self) -> int | None:
        t = self.read.summary.t_first_token
        return None if t is None else t - self.timed.t_start_ns

    @property
    def status_key(self) -> str:
        """The key it counts under: `200`, `transport:timeout`, or `200:stream_error` (an
        error inside a 2xx response), as in a run's status mix."""
        status, error = self.timed.status, self.error
        if status == 0:
            return f"transport:{error}"
        if error is None or error == f"http_{status}" or not 200 <= status < 300:
            return str(status)
        return f"{status}:{error}"


def resolve(options: ProbeOptions) -> Resolution:
    """The target reachable, its model and API resolved as a run resolves them."""
    base_url = options.target.rstrip("/")
    check_reachable(base_url, timeout_s=min(options.timeout_s, 5.0), http2=options.http2)
    named = options.api.api()
    access = Access(
        base_url,
        api_key=read_api_key(options.api_key_env),
        extra_headers=parse_headers(options.headers),
        timeout_s=min(options.timeout_s, RESOLVE_TIMEOUT_S),
        http2=options.http2,  # a target may serve h2c only, as the probe will speak it
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
    return _report(options.target, probe_requests(options, resolution))


def probe_requests(
    options: ProbeOptions, resolution: Resolution | None = None
) -> list[ProbeRequest]:
    """Send the probe's requests, one after another; each as timed and as read."""
    if resolution is None:
        resolution = resolve(options)
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
    parsers: list[StreamParser] = []

    def new_parser() -> StreamParser:
        parsers.append(dialect.parser(spec))
        return parsers[-1]

    try:
        results: list[ProbeResult] = probe(
            options.target.rstrip("/"),
            dialect.build(spec),
            options.n,
            http2=options.http2,
            timeout_s=options.timeout_s,
            fresh_connections=options.fresh_connections,
            new_sink=new_parser,
        )
    except ConnectError as exc:
        raise TargetError(str(exc)) from None
    return [ProbeRequest(r, p) for r, p in zip(results, parsers, strict=True)]


def _report(target: str, requests: list[ProbeRequest]) -> ProbeReport:
    ok = [r for r in requests if r.ok]
    timed = [r.timed for r in ok]
    phases = (
        _phase("dns", [r.dns_ns for r in timed]),
        _phase("connect", [r.connect_ns for r in timed]),
        _phase("tls", [r.tls_ns for r in timed]),
        _phase("ttfb", [r.ttfb_ns for r in timed]),
        _phase("ttft", [r.ttft_ns for r in ok]),
        _phase("total", [r.total_ns for r in timed]),
    )
    ttft, total = phases[-2], phases[-1]
    over = ttft if ttft.n else total
    ratio = None
    if over.p50_ms and over.p99_ms is not None:
        ratio = over.p99_ms / over.p50_ms
    counts = sorted(c for r in ok if (c := r.read.summary.output_tokens) is not None)
    return ProbeReport(
        target=redact_url(target),
        n=len(requests),
        ok_count=len(ok),
        statuses=dict(Counter(r.status_key for r in requests)),
        phases=phases,
        ratio_p99_p50=ratio,
        ratio_phase=over.name,
        output_tokens_p50=round(_rank(counts, 0.5)) if counts else None,
        tokens_from_usage=bool(ok) and all(r.read.summary.tokens_from_usage for r in ok),
    )


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
    lines.append(f"{report.ratio_phase} p99/p50 = {ratio}")
    if report.output_tokens_p50 is not None:
        source = "usage" if report.tokens_from_usage else "estimated from the text"
        lines.append(f"output tokens p50 = {report.output_tokens_p50} ({source})")
    lines.append("status: " + ", ".join(f"{k}: {v}" for k, v in sorted(report.statuses.items())))
    return "\n".join(lines)
