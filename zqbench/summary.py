"""The summary.json contract: the typed, versioned result of one run (and sweep.json's).

    summary = summarize(samples, run=..., slos=[...])   # zqbench.metrics.summarize
    summary.metrics["latency"].p99                      # seconds, "inf", or None
    text = summary.to_json()                            # summary.json's text
    summary = Summary.model_validate_json(text)         # pydantic.ValidationError if malformed

Writing and reading the file (secrets redacted, atomic write, a malformed file as one
UsageError) is zqbench.outputs.json_out's job: this module sits at the bottom of the
package and imports only pydantic and the standard library, so every layer can use it.

Why pydantic: summary.json is written by `zqbench run` and read back by `report`, `gate`
and `compare`, possibly from another version of zqbench. Its models validate such a file
once, where it is read, so a malformed or foreign file is one clear error and never a
KeyError deep in a renderer; they generate the file's JSON Schema (docs/summary.schema.json,
for tools outside zqbench); and they are the one serializer of the format.

JSON has no infinity: an error-adjusted value that lands on a failed request is the string
"inf" (`JsonFloat`); null means "no value" (unavailable, or an unbounded CI side), so nulls
are written, never dropped. A few keys are present only in some states: a stage's
`target_rate` and `classes` when set, a statistic's numbers only when it has values
(`{"n": 0}` otherwise), a metric with no value is `{"n": 0, "unavailable": "<reason>"}`, a
view without inputs is `{"unavailable": "<reason>"}` (`Unavailable`). Those models name the
keys they leave out (`_absent`), so a file read back re-serializes byte for byte.

Changing the format: adding a key to an open mapping (environment, telemetry, scenario
config), or an optional field that is absent when it has nothing to say (a report section:
resent, cut_at_end, ttft_split, connection_wait, reasoning), keeps the version: every file written
before it still reads. A zqbench older than such a field refuses a file that has it, naming
the key (extra keys are forbidden), which tells its user to upgrade. Anything else (a
renamed, removed or retyped field, a new required one) changes what a reader accepts: bump
SCHEMA and the `schema_id` literal together (zqbench.summary/2), since readers refuse other
versions. Either way, regenerate the schema and commit it:

    python -m zqbench.summary summary > docs/summary.schema.json

sweep.json, the result of `zqbench sweep`, is `SweepReport`: one `SweepStep` per run, each
read from that run's summary with the same conventions, and the `Knee`. It lives here, with
the format it is read from, and is versioned the same way (SWEEP_SCHEMA, zqbench.sweep/1):

    python -m zqbench.summary sweep > docs/sweep.schema.json
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Collection
from typing import Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_serializer
from pydantic.functional_serializers import SerializerFunctionWrapHandler

from zqbench.printable import shown

SCHEMA: Final = "zqbench.summary/1"
SWEEP_SCHEMA: Final = "zqbench.sweep/1"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic writes

JsonFloat: TypeAlias = float | Literal["inf", "-inf"] | None
"""A float as summary.json holds it: a number, "inf" / "-inf", or null (no value)."""

Verdict: TypeAlias = Literal["pass", "fail", "inconclusive", "invalid"]
# "open": requests at set times, whatever the server does (the arrival-rate executors);
# "closed": users that wait for each answer (the vus executors).
Loop: TypeAlias = Literal["open", "closed"]
SloVerdict: TypeAlias = Literal["pass", "fail", "inconclusive"]
SweepPhase: TypeAlias = Literal["ramp", "bisect"]  # a sweep step: ramping up, or bisecting


def json_number(value: float | None) -> JsonFloat:
    """A float for JSON: None stays null, +inf becomes "inf" (-inf "-inf"), NaN null."""
    if value is None or math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


class _Record(BaseModel):
    """A fixed-shape part of the summary: immutable, no key beyond its fields, and no
    NaN or infinite float (JSON has neither: infinity is the string "inf")."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class _SparseRecord(_Record):
    """A record some of whose keys are absent from the JSON in some states: by default each
    field whose default is None, while it is None (an optional part, or one a file written
    before it lacks)."""

    def _absent(self) -> Collection[str]:
        """The keys this instance leaves out of its JSON."""
        return [
            k
            for k, f in type(self).model_fields.items()
            if f.default is None and getattr(self, k) is None
        ]

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        absent = self._absent()
        return {k: v for k, v in data.items() if k not in absent}


class Unavailable(_Record):
    """A view the run has no inputs for, and why (never zeros)."""

    unavailable: str


# --- run facts ---------------------------------------------------------------------------


class ScenarioInfo(_Record):
    name: str  # a path, or bundled:NAME
    config: dict[str, Any]  # the scenario as loaded (open: its own format)


class Clock(_Record):
    """The run's start on both clocks; every t_* is ns after start_monotonic_ns."""

    start_monotonic_ns: int
    start_epoch_ns: int
    server_offset_ns: int  # server clock minus client clock
    server_offset_source: str


ModelSource: TypeAlias = Literal["option", "discovered", "server"]
ApiSource: TypeAlias = Literal["option", "scenario", "detected"]
_MODEL_FROM = {
    "option": "--model",
    "discovered": "discovered from GET /v1/models",
    "server": "the reference server's",
}
_API_FROM = {"option": "--api", "scenario": "the scenario's", "detected": "detected"}


class ApiProbe(_Record):
    """One set-up request of the target resolver (zqbench.target.resolve): one token, not
    streamed."""

    api: str
    path: str
    status: int  # 0: no HTTP answer
    ms: float
    error: str | None  # null: a well-formed answer; else the server's words or the failure


class TargetResolution(_Record):
    """How the run chose its model and API, and the requests that checked them."""

    model: str
    model_source: ModelSource  # --model, GET /v1/models, or the reference server's /health
    api: str
    api_source: ApiSource  # --api, the scenario's (both APIs answer, or no probe), or probed
    models: list[str]  # the ids GET /v1/models listed; [] when not listed
    probes: list[ApiProbe]

    def describe(self) -> str:
        """`model tiny (discovered from GET /v1/models), api openai (detected: anthropic
        404, openai 200)`: one line for the terminal and the reports."""
        answers = ", ".join(f"{p.api} {p.status or 'no answer'}" for p in self.probes)
        api_from = _API_FROM[self.api_source]
        how = f"{api_from}: {answers}" if answers else api_from
        model = shown(self.model)  # the target's own id: escaped and cut
        return f"model {model} ({_MODEL_FROM[self.model_source]}), api {self.api} ({how})"


class Stage(_SparseRecord):
    """One scenario stage; seconds since the run's start."""

    index: int
    name: str
    start: float
    end: float
    target_rate: float | None = None  # key present only when set
    classes: list[str] | None = None  # the classes it draws from; key absent: all


class Load(_SparseRecord):
    """Offered versus achieved load (req/s); the ratio is null in closed loop."""

    loop: Loop
    offered_requests: int | None
    offered_rate: float | None
    achieved_rate: float | None
    achieved_ratio: float | None
    # How late the client's event loops ran a ready timer (zqbench.engines.loop_lag), p99 and
    # the largest, s: what the token stamps may be late by; null before the probe existed
    client_lag_p99_s: float | None = None
    client_lag_max_s: float | None = None
    # A closed loop that reached the rows a run's analysis holds stopped there, before its
    # duration: the requests it had sent (absent when it did not)
    stopped_at_bound: int | None = None


class Requests(_Record):
    sent: int
    ok: int
    failed: int


class Throughput(_Record):
    requests_per_s: float | None
    goodput_per_s: float | None  # requests/s that met every per-request SLO
    goodput_requests: int
    output_tokens_per_s: float | None


# --- status mix and its migration ----------------------------------------------------------


class StageStatus(_Record):
    counts: dict[str, int]  # status key -> requests, most frequent first
    share: dict[str, float]


class OverTime(_Record):
    """Request counts per status key (or outcome) in bins of `bin_s` seconds of send time."""

    bin_s: float
    start_s: list[float]
    counts: dict[str, list[int]]  # one count per bin


class StatusMix(_Record):
    share: dict[str, float]
    by_stage: dict[str, StageStatus]  # stage index -> mix
    over_time: OverTime | Unavailable


class MigrationStage(_Record):
    stage: int
    name: str
    sent: int
    send_rate: float | None
    share: dict[str, float]
    latency_p50: float | None
    latency_p99: float | None
    latency_p99_p50: float | None
    time_to_reject_p99: float | None


class MigrationRow(_Record):
    status: str
    baseline: float  # share in the baseline stage
    overload: float


class Migration(_Record):
    """The baseline stage beside the overload stage (the one with the highest send rate)."""

    baseline: MigrationStage
    overload: MigrationStage
    rows: list[MigrationRow]


class RetryAfter(_Record):
    """Refusals (429/503/529, or in disguise: a 2xx `refused_in_stream`) that carried
    Retry-After, and its values (s)."""

    refusals: int
    with_retry_after: int
    share: float
    min_s: float | None
    max_s: float | None


class HeadOfLineRow(_Record):
    """One metric of one class: the baseline stage's quantiles, the mixed stage's, ratios."""

    n_baseline: int
    n_mixed: int
    baseline_p50: float | None
    mixed_p50: float | None
    ratio_p50: float | None
    baseline_p99: float | None
    mixed_p99: float | None
    ratio_p99: float | None


class HeadOfLineClass(_Record):
    latency: HeadOfLineRow
    ttft: HeadOfLineRow


class HeadOfLineWorst(_Record):
    """The worst class per ratio: the headline numbers."""

    latency_p50_ratio: float | None
    latency_p99_ratio: float | None
    ttft_p50_ratio: float | None
    ttft_p99_ratio: float | None


class HeadOfLine(_Record):
    baseline_stage: int
    mixed_stage: int
    classes: list[str]
    by_class: dict[str, HeadOfLineClass]
    worst: HeadOfLineWorst


# --- duration metrics ----------------------------------------------------------------------


class Ci(_Record):
    """95% distribution-free intervals [low, high]; null: unbounded side."""

    p50: tuple[JsonFloat, JsonFloat]
    p99: tuple[JsonFloat, JsonFloat]


class Stats(_SparseRecord):
    """Order statistics of one group of values (seconds); only `n` when it has none."""

    n: int
    mean: JsonFloat = None
    min: JsonFloat = None
    p50: JsonFloat = None
    p90: JsonFloat = None
    p95: JsonFloat = None
    p99: JsonFloat = None
    p999: JsonFloat = None
    max: JsonFloat = None
    ci: Ci | None = None

    def _absent(self) -> Collection[str]:
        if self.n == 0:
            return set(Stats.model_fields) - {"n"}
        return ()


class MetricStats(Stats):
    """A duration metric over the run, by stage and by request class; or why it has no
    value at all (`unavailable`, with n = 0 and nothing else)."""

    by_stage: dict[str, Stats] = Field(default_factory=dict)  # stage index -> stats
    by_class: dict[str, Stats] = Field(default_factory=dict)
    unavailable: str | None = None

    def _absent(self) -> Collection[str]:
        if self.unavailable is not None:
            return set(MetricStats.model_fields) - {"n", "unavailable"}
        return {"unavailable", *super()._absent()}


class ClassRatio(_Record):
    p99_p50: JsonFloat
    n: int


class Ratio(_Record):
    """p99/p50 per request class; the run's value is the worst class with min_samples."""

    p99_p50: JsonFloat
    worst_class: str | None
    min_samples: int
    by_class: dict[str, ClassRatio]


# --- the server's own account of its queue (its Prometheus metrics) -----------------------


class GaugeSummary(_Record):
    """A gauge read at every scrape, summed over its series (one per model or engine)."""

    metric: str  # as the engine names it, e.g. vllm:num_requests_waiting
    mean: float
    max: float


class QueueTime(_Record):
    """Time requests spent queued, from the histogram's growth over the run (seconds):
    each bucket's count at the last scrape minus the first. A percentile is the upper bound
    of the bucket its rank falls in (it is at most that; "inf": past `largest_bound`), not a
    value interpolated inside the bucket; mean = growth of _sum / of _count, exact."""

    metric: str  # the histogram's name, e.g. vllm:request_queue_time_seconds
    count: int  # requests the histogram counted during the run
    mean: float | None
    p50: JsonFloat
    p90: JsonFloat
    p99: JsonFloat
    largest_bound: float | None = None  # the histogram's largest finite bucket bound


class QueueSeries(_Record):
    """The gauges at each scrape (the peak of each run of scrapes when there were many)."""

    t: list[float]  # seconds since the run's start
    waiting: list[float | None]
    running: list[float | None]


class CacheCounters(_Record):
    """The server's prefix cache over the run, from its own counters: their growth from the
    first scrape to the last, in prompt tokens."""

    metrics: list[str]  # the counters read, as the server names them
    queries: float  # prompt tokens looked up in the cache
    hits: float  # of them, found there
    hit_rate: JsonFloat  # hits / queries; null without queries


class Rejections(_Record):
    """The requests the server counted as refused at admission over the run: its counter's
    growth from the first scrape to the last, in all and by the counter's `reason` label."""

    metric: str  # the counter, as the server names it
    total: float
    by_reason: dict[str, float]  # "" for a series without a reason label


class CacheHitRate(_Record):
    """The server's prefix cache from its own hit-rate gauge (SGLang's
    `sglang:cache_hit_rate`, a recent window's rate, not counters): sampled at each scrape."""

    metric: str
    mean: float  # over the run's scrapes
    max: float
    scrapes: int


class CachedUsage(_Record):
    """What the responses' usage said of cached prompt tokens, and TTFT with and without."""

    requests: int  # successful responses
    reporting: int  # of them, with a cached-token count in their usage
    cached_tokens: int  # summed over the reporting ones
    prompt_tokens: int  # summed over the reporting ones
    cached_share: JsonFloat  # cached_tokens / prompt_tokens
    cached_requests: int  # reporting responses with cached tokens > 0
    ttft_p50_cached: JsonFloat  # seconds; null without such requests
    ttft_p50_uncached: JsonFloat


class PrefixCache(_Record):
    """The prefix cache: the server's counters, and what its responses' usage said."""

    server: CacheCounters | CacheHitRate | Unavailable
    usage: CachedUsage | Unavailable


class TurnStats(_Record):
    """One turn index of the sessions: its requests, and their TTFT and latency (seconds)."""

    turn: int  # from 0
    requests: int
    ok: int
    ttft_p50: JsonFloat
    ttft_p99: JsonFloat
    latency_p50: JsonFloat
    latency_p99: JsonFloat
    prompt_tokens_mean: JsonFloat  # of its successful requests: the context so far


class Sessions(_Record):
    """A sessions run's conversations: by turn as the context grows, and each whole."""

    turns: int  # the most turns a session sent
    sessions: int  # with at least one turn sent
    completed: int  # with every turn sent and answered
    by_turn: list[TurnStats]
    # First turn sent to last answer ended, of the completed sessions (seconds).
    session_time_p50: JsonFloat
    session_time_p99: JsonFloat
    session_time_mean: JsonFloat


class ServerQueue(_SparseRecord):
    """The server's own account of its queue, scraped from its /metrics during the run."""

    engine: str  # vllm | sglang | tgi | refserver
    engine_name: str  # as shown: "vLLM"
    url: str  # the /metrics scraped, without credentials
    found_by: Literal["discovery", "telemetry"]  # on the target's origin, or --telemetry
    scrapes: int
    waiting: GaugeSummary | Unavailable
    running: GaugeSummary | Unavailable
    queue_time: QueueTime | Unavailable
    over_time: QueueSeries
    # The prefix cache's counters; absent (None) in files written before them.
    prefix_cache: CacheCounters | CacheHitRate | Unavailable | None = None
    # The refusals the server counted itself; absent in files written before them.
    rejections: Rejections | Unavailable | None = None


# --- outcomes: each request served, queued or refused (zqbench.metrics.outcomes) ----------


class OutcomeRules(_Record):
    """The bounds a request's outcome is judged by (seconds), from `[outcomes]`."""

    server_queue: float  # admitted with timing headers: queued past this server_queue
    margin: float  # without headers: the least allowance past twice the at-rest TTFT
    at_rest_probes: int  # sequential probes per prompt size before the load (0: none)


class AtRestProbe(_Record):
    """One set-up probe: a request alone on the target, streamed, its first token timed."""

    size: int  # the prompt tokens it asked for (probes are grouped by it)
    prompt_tokens: int  # as the target counted them (its usage), else as asked
    ttft: float  # seconds


class AtRest(_SparseRecord):
    """The target's unloaded TTFT, fitted over prompt length: base + slope * tokens."""

    probes: list[AtRestProbe]
    base: float  # seconds at 0 prompt tokens
    slope: float  # seconds per prompt token (never below 0)
    spread: float  # seconds: the widest range among one size's probes (its uncertainty)
    # The first request, which opened the probes' connection: sent and answered, not in the
    # fit (its TTFT pays the connect). Declared so the set-up requests add up; key absent
    # from runs saved before it was.
    opener: AtRestProbe | None = None


class Capacity(_Record):
    """How many requests the target computes at once, and where that figure came from."""

    value: int
    # stated: by the target (/health); running_gauge: the peak of its own running-requests
    # gauge over the run; estimate: the most requests this run had admitted at once
    source: Literal["stated", "running_gauge", "estimate"]
    detail: str  # "/health `slots`", "max refserver_num_requests_running", ...


class OutcomeBasis(_SparseRecord):
    """What the outcomes were judged by; saved so that gate and report judge alike."""

    rules: OutcomeRules
    at_rest: AtRest | Unavailable
    # The capacity the target stated before the load (GET /health); None: it stated none
    # (or the run was saved before zqbench asked), and the run's own scrapes or requests
    # give it (zqbench.metrics.false_refusals).
    capacity: Capacity | None = None


class FalseRefusalStage(_Record):
    refusals: int
    false: int


class FalseRefusals(_Record):
    """Refusals issued while the target had a free slot (zqbench.metrics.false_refusals):
    fewer of this run's admitted requests in flight across the refusal than its capacity."""

    capacity: Capacity
    grace: float  # seconds an admitted request still counts in flight after its last byte
    refusals: int
    count: int  # false refusals
    rate: float  # of every request sent (the SLO key false_refusals:rate)
    share_of_refusals: float | None  # None: nothing refused
    by_stage: dict[str, FalseRefusalStage]  # stage index -> counts
    # The first MAX_LISTED false refusals: send time (seconds since the run's start) and
    # how many admitted requests were in flight across it.
    t: list[float]
    occupancy: list[int]


class OutcomeStage(_Record):
    counts: dict[str, int]  # outcome -> requests, every outcome listed
    admitted_queued_share: float | None  # queued / (served + queued); None: none admitted
    # refused_slow / refusals (fast, slow and in disguise); None: no refusal
    refusals_slow_share: float | None


class Outcomes(_SparseRecord):
    """Each request's outcome: served at once, queued, refused fast or slow, refused in
    disguise (refused_in_stream: a 2xx whose answer carried an overload error before any
    token; absent from runs saved before it), timed out, failed, interrupted by the run's
    end, or undetermined (no evidence to judge by)."""

    basis: OutcomeBasis
    hold: JsonFloat  # median seconds a successful request streamed after its first token
    counts: dict[str, int]
    share: dict[str, float]  # of every request sent
    admitted_queued_share: float | None
    refusals_slow_share: float | None
    evidence: dict[str, int]  # what decided: server_queue, ttft, time_to_reject, status, none
    by_stage: dict[str, OutcomeStage]  # stage index -> counts
    over_time: OverTime | Unavailable  # every outcome's counts
    # Refusals made while a slot was free; Unavailable: no capacity to judge them by (no
    # request admitted, none stated); None in files written before zqbench judged them.
    false_refusals: FalseRefusals | Unavailable | None = None


# --- Retry-After follow-ups ([outcomes] retry_after_follow_ups) ---------------------------


class RetryAfterFollowUp(_Record):
    """Refusals sent again exactly when their Retry-After said (zqbench.engines.follow_up):
    extra requests, kept out of samples.parquet and every other figure (retry_after.parquet
    holds each try)."""

    asked: int  # refusals the scenario allowed to follow
    attempts: int  # tries per followed refusal, at most
    followed: int  # refusals followed
    extra_requests: int  # tries sent: traffic beside the run's own
    tried: int  # followed refusals whose first try was answered (the rest: the run ended)
    honoured: int  # admitted at the first try, when the Retry-After said
    honoured_share: float | None  # honoured / tried; None: nothing tried
    admitted_later: int  # admitted at a later try
    # Of those admitted later: seconds from the refusal's end to the admitting try's send.
    to_admission: list[float]
    refused_throughout: int  # refused at every try, or at last without a Retry-After
    failed: int  # a try that ended neither admitted nor refused (an error)
    ended_with_run: int  # cut by the run's end before any admission
    send_late_p99: JsonFloat  # seconds the tries went out past their due time


# --- requests the run's end cut ------------------------------------------------------


class CutAtEnd(_Record):
    """Requests still unanswered when the run ended (graceful stop over, a [stop] rule,
    Ctrl-C): zqbench cut them (`transport:interrupted`); absent when none was."""

    how: Literal["graceful_stop", "stop_rule", "interrupted"]  # what ended the run
    grace: float | None  # seconds the in-flight requests were given; None: not known
    requests: int  # cut
    waiting: int  # of them, with no first token yet: still waiting to start
    streaming: int  # of them, cut mid-answer
    age_min: float  # seconds from their send to the cut
    age_max: float


# --- requests sent again on a new connection ----------------------------------------


RESENT_WHY = (
    "the server closed kept-alive connections under requests, before any byte of an answer"
    " (llama.cpp's server does so after every stream, its head promising keep-alive): those"
    " requests were sent again on a new connection, never counted as the server's errors,"
    " and zqbench stopped reusing connections to the target for the rest of the run"
)


class Resent(_Record):
    """Requests the HTTP/1.1 transport sent once more on a new connection (their samples'
    `resent`); absent when none was."""

    count: int  # requests sent again
    why: str  # RESENT_WHY


class ConnectionWait(_Record):
    """Sends that waited for a free connection, every connection the pool may open being held
    by a request the target had not answered; absent unless the wait's p99 passed the
    schedule-lag limit (counted as the generator's lag, it would have made the run invalid).
    The wait is the target's: it counts in latency_corrected, not in the generator's own
    schedule_lag (docs/design.md, "Late sends")."""

    waited: int  # requests whose connection_wait passed limit_s
    sent: int  # requests sent
    limit_s: float  # the run's schedule-lag limit (validity.thresholds.max_schedule_lag_p99_s)
    p99_s: float  # connection_wait p99 over every request sent
    max_s: float
    peak_in_flight: int  # the most requests on the wire at once: the pool's limit, held


# --- where the time to first token went ---------------------------------------------


class TtftSplit(_Record):
    """Each successful request's TTFT in two parts: until the response head (its ttfb) and
    from the head to the first token (ttft - ttfb); absent when no request had both."""

    requests: int  # successful requests with a head and a first token
    head_p50: JsonFloat  # ttfb, s
    head_p99: JsonFloat
    after_head_p50: JsonFloat  # ttft - ttfb, s
    after_head_p99: JsonFloat
    after_head_share: float  # the part of their summed TTFT after the head, 0..1


class Reasoning(_SparseRecord):
    """What reasoning models and tool calls did (docs/metrics.md, "Reasoning and tool
    calls"); absent when no successful request's answer carried thinking or a tool call."""

    requests: int  # successful requests
    thinking_requests: int  # of them, those whose answer carried thinking
    redacted: int  # of those, the ones whose thinking the server said was redacted
    # of those, the ones whose thinking block streamed no text (display omitted); None: a
    # run saved before it
    omitted: int | None = None
    unanswered: int  # of those, the ones that only thought: no text or tool call came
    thinking_p50: JsonFloat  # t_first_answer - t_first_token, s: the thinking before the answer
    thinking_p99: JsonFloat
    reasoning_tokens_mean: JsonFloat  # over the requests that thought and gave a count
    reasoning_tokens_counted: int  # of those counts, the ones zqbench counted (no usage)
    tool_requests: int  # successful requests whose answer called a tool
    tool_calls: int  # the calls they made


# --- [stop] rules: a stage or the run ended at saturation ------------------------------


class StopGrowth(_Record):
    """queue_growth's evidence: each slope and its one-sided lower bound."""

    wait_by: Literal["server_queue", "ttft"]  # what each admitted request's wait is
    wait_slope: float  # seconds of wait per second of send time
    wait_slope_low: float
    wait_rise_low: float  # the lower bound over the window's sends, seconds
    min_rise: float  # what the rise had to reach, seconds
    inflight_slope: float  # requests in flight per second
    inflight_slope_low: float
    inflight_now: int


class StopEvent(_SparseRecord):
    """One rule that tripped (zqbench.stop): what it ended, when, and what it saw."""

    rule: Literal["error_rate", "queue_growth", "queued_share"]
    ends: Literal["stage", "run"]
    stage: int  # index into stages: the stage under watch
    stage_name: str
    at: float  # seconds since t = 0
    reason: str  # one sentence
    requests: int  # judged in the rule's window
    measured: float  # the share (error_rate, queued_share) or the wait's rise, seconds
    bound: float  # what `measured` passed
    growth: StopGrowth | None = None  # queue_growth only


class Stop(_Record):
    """The scenario's [stop] rules and what they ended. A run they stopped fails: its
    target saturated under the load (docs/design.md)."""

    rules: list[str]  # the rules watched, by name
    events: list[StopEvent]  # in the order they tripped; empty: none did
    ended_run: bool  # a rule ended the run (or the last stage)
    not_sent: int | None  # scheduled requests the ended stages left unsent; None: closed loop


# --- what packet loss did (a [network] packet-loss impairment) ----------------------------


class LossWindow(_Record):
    """When the drop rules were really in place, seconds since the run's start."""

    applied_s: float
    removed_s: float | None  # null: the run could not remove them (see its notes)


class LossStage(_Record):
    """One stage of the run: its requests, errors and latency P99 (seconds)."""

    stage: int
    name: str
    impaired: bool
    requests: int
    errors: int  # failed or refused
    error_share: float | None  # errors / requests; null without requests
    p99_s: float | None  # latency of successful requests; null without one
    p99_ratio: float | None  # over the baseline P99


class LossRecovery(_Record):
    """When the rolling P99 was back within `tolerance` of the baseline P99: seconds after
    `after_s` (the end of the last impaired stage), over forward windows of `window_s` with
    at least `min_requests` successful requests; null when it never was."""

    recovered: bool
    recovery_s: float | None
    after_s: float
    window_s: float
    min_requests: int
    tolerance: float


class PacketLoss(_Record):
    """Baseline against the impaired stages (zqbench.impair.analysis): latency P99 of
    successful requests, error share, and the recovery time."""

    loss: float  # fraction of packets dropped, each direction
    impaired_stages: list[int]
    baseline_stages: list[int]  # the stages before the first impaired one
    windows: list[LossWindow]  # as the run applied the rules (empty: never applied)
    dropped_packets: int
    baseline_p99_s: float | None
    loss_p99_s: float | None  # the impaired stages together
    p99_delta_s: float | None
    p99_ratio: float | None
    loss_error_share: float | None
    stages: list[LossStage]
    recovery: LossRecovery


class DistributedWorker(_Record):
    """One worker of a `--distributed` run (docs/distributed.md)."""

    index: int
    host: str
    node: str  # Locust's client id
    state: Literal["done", "stopped", "lost"]
    clock_offset_ns: int | None  # the master's monotonic clock minus the worker's
    clock_uncertainty_ns: int | None  # the true offset is within +- this (half the best RTT)
    clock_rtt_ns: int | None
    requests_assigned: int | None  # open loop: its slice of the schedule; closed loop: null
    requests_sent: int | None  # as it said once done; null: it never said (lost)
    samples_received: int
    lost_requests: int  # scheduled for it, never arrived (a lost worker's)
    missing: str | None  # the slice it did not send, in words; null when none
    schedule_lag_p99_s: float | None  # its own lag (open loop), judged like the run's


class Distributed(_Record):
    """How a `--distributed` run was spread, and what of it was lost."""

    master: str  # the bind address, HOST:PORT
    expected_workers: int
    workers: list[DistributedWorker]
    lost_requests: int
    lost_share: float  # of the offered requests (open loop) or VU-time (closed loop)
    max_lost_share: float  # above it the run is invalid
    # Messages the master dropped, by reason ("wrong proof", "malformed frame", ...): a
    # stranger's or a broken worker's, never merged (docs/distributed.md#trust).
    rejected_messages: dict[str, int] = {}


# --- the verdict ---------------------------------------------------------------------------


class SloRecord(_Record):
    expr: str
    metric: str
    value: JsonFloat  # null: unavailable
    threshold: float  # base units: seconds, a fraction, req/s or a ratio
    verdict: SloVerdict
    ci_low: JsonFloat  # null: unbounded, or no interval
    ci_high: JsonFloat
    n: int
    samples_needed: int | None
    message: str


class Thresholds(_SparseRecord):
    """When a run is invalid rather than slow (metrics.summarize.ValidityThresholds)."""

    max_schedule_lag_p99_s: float
    max_client_lag_p99_s: float | None = None  # None: a run judged before the probe
    min_achieved_ratio: float
    min_samples: int
    min_ratio_samples: int


class Validity(_Record):
    ok: bool
    reasons: list[str]
    thresholds: Thresholds


class _Document(_Record):
    """A whole JSON file: versioned by its "schema" key, written indented."""

    # The field is `schema_id` (BaseModel has a `schema` method); in JSON it is "schema".
    model_config = ConfigDict(
        validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    def to_json(self) -> str:
        """The file's text, indented (ValueError on NaN or infinity)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, allow_nan=False) + "\n"


class ProfileOp(_Record):
    """One op (torch) or kernel/NVTX range (nsys stats) of the capture, by time spent."""

    name: str
    calls: int
    total_ms: float  # its own time (self time for torch ops), summed over the calls


class ProfileRequest(_Record):
    """One of the slowest requests by TTFT inside the capture window, and its range."""

    request_id: str  # x-request-id as sent ("zq-<request_id of samples.parquet>")
    ttft: JsonFloat  # seconds
    range_name: str  # the range to look for in the trace ("request zq-17")
    in_trace: bool | None  # the capture holds its range; None: not known (nsys, ncu)
    trace_start_ms: float | None = None  # its start, from the trace's first event


class Profile(_Record):
    """`zqbench profile`: what was captured, when, where the files are, what it shows."""

    tool: Literal["nsys", "ncu", "torch"]
    window_start: float  # seconds since t = 0, as asked (stage or START:END)
    window_end: float
    started_at: float | None  # seconds since t = 0, when the capture really started
    stopped_at: float | None
    artifacts: list[str]  # files in the run folder, relative to it
    request_ranges: int  # per-request ranges in the capture
    top_ops: list[ProfileOp]
    ranges: list[ProfileOp]  # nsys: the NVTX range summary
    slowest: list[ProfileRequest]
    notes: list[str]


class Summary(_Document, _SparseRecord):
    """summary.json. Durations are seconds; see the module docstring for the conventions."""

    schema_id: Literal["zqbench.summary/1"] = Field(default=SCHEMA, alias="schema")
    verdict: Verdict
    scenario: ScenarioInfo
    target: str  # URL without credentials
    api: str
    started_at: str  # ISO 8601, UTC
    duration: float
    clock: Clock
    environment: dict[str, Any]  # open: versions, host, server facts, hook notes
    stages: list[Stage]
    load: Load
    requests: Requests
    throughput: Throughput
    status_codes: dict[str, int]  # status key -> requests, most frequent first
    status_mix: StatusMix
    migration: Migration | Unavailable
    retry_after: RetryAfter | Unavailable
    head_of_line: HeadOfLine | Unavailable
    metrics: dict[str, MetricStats]  # metric name -> stats
    ratios: dict[str, Ratio]  # "latency", "ttft"
    telemetry: dict[str, Any]  # open: scalars from telemetry hooks, e.g. gpu_density
    slos: list[SloRecord]
    validity: Validity
    # The server's metrics: found on the target, or why not. Absent (None) in files
    # written before it existed, and left out again when such a file is written back.
    server_queue: ServerQueue | Unavailable | None = None
    # How the model and API were chosen; absent from files written before it existed, and
    # from runs that did not resolve a target.
    target_resolution: TargetResolution | None = None
    # What a [network] packet-loss impairment did; absent (None) without one, and in files
    # written before it existed.
    packet_loss: PacketLoss | None = None
    # Workers of a --distributed run; absent from local runs and older files.
    distributed: Distributed | None = None
    # The capture of a `zqbench profile` run; absent from other runs and older files.
    profile: Profile | None = None
    # The prefix cache, from the server's counters and the responses' usage; absent from
    # runs that looked at neither (no server metrics, no cached-token counts) and older files.
    prefix_cache: PrefixCache | None = None
    # A sessions run's conversations; absent from other runs and older files.
    sessions: Sessions | None = None
    # Each request's outcome (served, queued, refused, ...); absent from older files.
    outcomes: Outcomes | None = None
    # Refusals followed at their Retry-After; absent unless the scenario asked for them.
    retry_after_follow_up: RetryAfterFollowUp | None = None
    # The scenario's [stop] rules and what they ended; absent without rules.
    stop: Stop | None = None
    # Requests the run's end cut, and why; absent when none was.
    cut_at_end: CutAtEnd | None = None
    # Requests sent again on a new connection (a kept-alive one closed under them); absent
    # when none was.
    resent: Resent | None = None
    # Sends that waited for a connection the target held; absent unless the wait's p99
    # passed the schedule-lag limit.
    connection_wait: ConnectionWait | None = None
    # Where the time to first token went: before the response head or after it; absent
    # when no request had both.
    ttft_split: TtftSplit | None = None
    # Thinking and tool calls; absent when no answer carried either.
    reasoning: Reasoning | None = None


# --- sweep.json: `zqbench sweep`, one step per run -----------------------------------------


class SweepSettings(_Record):
    """The search as it ran: the scenario's [sweep] table with the command's overrides
    (zqbench.scenario.SweepConfig, field for field)."""

    min_rate: float  # req/s
    max_rate: float
    step_factor: float
    step_duration_s: float
    bisect_steps: int


class StepSlo(_Record):
    expr: str
    verdict: SloVerdict


class SweepStep(_Record):
    """One constant-rate run of the search, read from its summary (durations in seconds)."""

    index: int  # in the order the steps ran
    phase: SweepPhase
    rate: float  # req/s offered
    verdict: Verdict
    passed: bool  # verdict "pass": the only one that passes
    sent: int
    failed: int
    achieved_rate: float | None
    latency_p50: JsonFloat
    latency_p99: JsonFloat
    ttft_p50: JsonFloat
    ttft_p99: JsonFloat
    slos: list[StepSlo]
    validity_reasons: list[str]
    out_dir: str  # the step's run folder, inside the sweep folder
    # The first [stop] rule that ended the step (its sentence): the target saturated there,
    # and the sweep ends with it. None: no rule tripped, or the scenario has none.
    stopped: str | None = None


class Knee(_Record):
    """Capacity at SLO: the highest passing rate, and the step that ran it; or, `by`
    "stop", the first step a [stop] rule ended: where the target saturated."""

    rate: float
    step: int
    by: Literal["slo", "stop"] = "slo"


class SweepReport(_Document):
    """sweep.json: every step of a `zqbench sweep`, and the knee (null: no passing rate)."""

    schema_id: Literal["zqbench.sweep/1"] = Field(default=SWEEP_SCHEMA, alias="schema")
    scenario: str
    target: str  # URL without credentials
    started_at: str  # ISO 8601, UTC, whole seconds
    slos: list[str]  # the scenario's, then the command's
    config: SweepSettings
    steps: list[SweepStep]  # in the order they ran
    curve: list[SweepStep]  # the same steps, by rate
    knee: Knee | None


SCHEMAS: Final[dict[str, type[_Document]]] = {"summary": Summary, "sweep": SweepReport}


def json_schema(document: type[_Document]) -> str:
    """The JSON Schema of a file, as committed in docs/ (SCHEMAS names them)."""
    schema = {"$schema": JSON_SCHEMA_DIALECT, **document.model_json_schema()}
    return json.dumps(schema, indent=2) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) != 1 or args[0] not in SCHEMAS:
        sys.exit(f"usage: python -m zqbench.summary {'|'.join(SCHEMAS)}")
    print(json_schema(SCHEMAS[args[0]]), end="")
