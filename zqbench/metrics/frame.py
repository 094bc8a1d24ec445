"""Per-request metric columns, derived from the samples DataFrame (docs/metrics.md).

Every metric below is one small function from the sample columns to one value per
request, in nanoseconds, NaN where the metric is not defined for that request. A metric
with no defined value at all is *unavailable* and carries a reason; it is never 0.

"Successful" (`ok`) means `error` is null and the HTTP status is 2xx. Latency, TTFB,
TTFT, TPOT and ITL describe successful requests only; failures enter the
error-adjusted variants as +inf.

Client times (`t_*`) are nanoseconds on the client's monotonic clock relative to the
run's start; server stamps (`srv_*`) are the server's epoch seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from zqbench.dialects.base import THINKING, TOOL
from zqbench.metrics.classify import REFUSAL_STATUSES, REFUSED_IN_STREAM_ERROR, answer_of

if TYPE_CHECKING:
    from zqbench.metrics.outcomes import Classified

NS_PER_S = 1_000_000_000
JITTER_WINDOW = 100  # successful requests per dispatch_jitter window


class Samples(Protocol):
    """What the frame reads of the samples: a pandas DataFrame, or samples.parquet read a
    column at a time (zqbench.samples.columns.SampleColumns)."""

    @property
    def columns(self) -> Any: ...  # the column names (`name in samples.columns`)

    def __getitem__(self, name: str) -> pd.Series: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class Columns:
    """The sample columns as float64 arrays (NaN for null), plus the success mask."""

    t_intended: np.ndarray
    t_send: np.ndarray
    t_headers: np.ndarray
    t_first_token: np.ndarray
    t_first_answer: np.ndarray  # NaN in a run saved before the column existed
    t_last_token: np.ndarray  # t_end for samples recorded before the column existed
    t_end: np.ndarray
    status: np.ndarray  # int64
    ok: np.ndarray  # bool
    # bool: refused, by its status (429, 503, 529) or in disguise (a 2xx refused_in_stream)
    refused: np.ndarray
    unsent: np.ndarray  # bool: interrupted before a byte was written (t_send is not real)
    output_tokens: np.ndarray
    n_chunks: np.ndarray  # token events
    itl_mean_ns: np.ndarray
    itl_p99_ns: np.ndarray
    itl_max_ns: np.ndarray
    srv_received: np.ndarray
    srv_dispatch: np.ndarray
    srv_start: np.ndarray
    connection_wait: np.ndarray  # NaN in a run saved before the column existed
    start_epoch_ns: int = 0
    clock_offset_ns: int = 0  # server clock minus client clock


# The Columns read as float64 (NaN for null, or for a column the samples lack): all but the
# status, the masks derived from it, and the run's two clock constants.
FLOAT_COLUMNS = tuple(
    f.name
    for f in fields(Columns)
    if f.name not in {"status", "ok", "refused", "unsent", "start_epoch_ns", "clock_offset_ns"}
)


def float_column(df: Samples, name: str) -> np.ndarray:
    """A sample column as float64, NaN for null; all NaN when the samples lack it. A column
    of nothing but nulls is one read-only NaN seen at every row (no memory a row): most are,
    in a run (sessions, thinking, Retry-After, a target without timing headers), and held as
    arrays they were 8 bytes a row each (#44)."""
    if name not in df.columns:
        return _none_of(len(df))
    values = df[name].to_numpy(dtype=np.float64, na_value=np.nan)
    return _none_of(len(values)) if np.isnan(values).all() else values


def _none_of(n: int) -> np.ndarray:
    return np.broadcast_to(np.float64(np.nan), (n,))


def bool_column(df: Samples, name: str) -> np.ndarray:
    """A sample column as bool, False for null; all False when the samples lack it."""
    if name not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return df[name].fillna(False).to_numpy(dtype=bool)


def columns_of(samples: Samples, *, start_epoch_ns: int = 0, clock_offset_ns: int = 0) -> Columns:
    status = samples["status"].to_numpy(dtype=np.int64)
    two_xx = (status >= 200) & (status < 300)
    error = samples["error"]
    ok = error.isna().to_numpy() & two_xx
    disguised = (error == REFUSED_IN_STREAM_ERROR).to_numpy(dtype=bool, na_value=False)
    values = {name: float_column(samples, name) for name in FLOAT_COLUMNS}
    if "t_first_answer" not in samples.columns:
        # Saved before zqbench told answers from thinking: only text was a token then, so
        # the first token was the first answer.
        values["t_first_answer"] = values["t_first_token"]
    if "t_last_token" not in samples.columns:
        # Saved before zqbench recorded the last token: TPOT then ran to t_end, and a
        # re-rendered old run keeps the numbers it was published with.
        values["t_last_token"] = values["t_end"]
    interrupted = (error == "interrupted").to_numpy(dtype=bool, na_value=False)
    del error
    return Columns(
        **values,
        status=status,
        ok=ok,
        refused=np.isin(status, REFUSAL_STATUSES) | (disguised & two_xx),
        unsent=interrupted & (values["t_send"] == values["t_end"]),
        start_epoch_ns=start_epoch_ns,
        clock_offset_ns=clock_offset_ns,
    )


def _ok_only(c: Columns, values: np.ndarray) -> np.ndarray:
    return np.where(c.ok, values, np.nan)


# --- one function per metric (ns per request, NaN where undefined) ------------------------


Metric = Callable[[Columns], np.ndarray]


@dataclass(frozen=True)
class MetricSpec:
    func: Metric
    ok_only: bool  # undefined for failed requests
    missing: str  # why it is unavailable when no request defines it


# Every per-request metric by name, in the order its function is defined (summary.json's).
REQUEST_METRICS: dict[str, MetricSpec] = {}
_CLOSED_LOOP = "closed loop: requests have no intended send time"
_NO_GAPS = "no inter-token gaps were recorded"


def _metric(ok_only: bool, missing: str) -> Callable[[Metric], Metric]:
    """Registers the metric it decorates in REQUEST_METRICS, under its function's name."""

    def register(func: Metric) -> Metric:
        REQUEST_METRICS[func.__name__] = MetricSpec(func, ok_only, missing)
        return func

    return register


@_metric(True, "no successful request")
def latency(c: Columns) -> np.ndarray:
    """latency = t_end - t_send, successful requests."""
    return _ok_only(c, c.t_end - c.t_send)


@_metric(True, _CLOSED_LOOP)
def latency_corrected(c: Columns) -> np.ndarray:
    """latency_corrected = t_end - t_intended, successful requests (open loop only).

    Measured from when the schedule meant to send, so a generator or connection pool
    that fell behind cannot hide queueing (coordinated omission)."""
    return _ok_only(c, c.t_end - c.t_intended)


@_metric(False, "no request sent")
def latency_error_adjusted(c: Columns) -> np.ndarray:
    """latency for successful requests; +inf for every failed or refused request."""
    return np.where(c.ok, c.t_end - c.t_send, np.inf)


@_metric(False, _CLOSED_LOOP)
def latency_corrected_error_adjusted(c: Columns) -> np.ndarray:
    """latency_corrected for successful requests; +inf for failed ones (open loop only)."""
    values = np.where(c.ok, c.t_end - c.t_intended, np.inf)
    return np.where(np.isnan(c.t_intended), np.nan, values)


@_metric(True, "no response headers were recorded")
def ttfb(c: Columns) -> np.ndarray:
    """ttfb = t_headers - t_send, successful requests."""
    return _ok_only(c, c.t_headers - c.t_send)


@_metric(True, "no first token was recorded")
def ttft(c: Columns) -> np.ndarray:
    """ttft = t_first_token - t_send, successful requests."""
    return _ok_only(c, c.t_first_token - c.t_send)


@_metric(True, "no answer token was recorded (or the samples predate t_first_answer)")
def ttfa(c: Columns) -> np.ndarray:
    """ttfa = t_first_answer - t_send, successful requests: the first text or tool-call
    token, after any thinking (a request that only thought has none); ttft without it."""
    return _ok_only(c, c.t_first_answer - c.t_send)


@_metric(True, "no successful request had more than one output token in two or more token events")
def tpot(c: Columns) -> np.ndarray:
    """tpot = (t_last_token - t_first_token) / (output_tokens - 1), successful requests with
    output_tokens > 1 and at least two token events.

    vLLM's formula (first to last token, not to the end of the body); output_tokens comes
    from the server's usage when it reports one, so a server that packs several tokens into
    a chunk is still divided by its real token count. One event (a non-streamed body, or
    the whole answer in one chunk) times no decoding: undefined, not 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        values = (c.t_last_token - c.t_first_token) / (c.output_tokens - 1)
    timed = (c.output_tokens > 1) & (c.n_chunks >= 2)
    return _ok_only(c, np.where(timed, values, np.nan))


@_metric(True, f"{_NO_GAPS} (fewer than 2 events)")
def itl(c: Columns) -> np.ndarray:
    """itl = the request's mean gap between consecutive token events (itl_mean_ns).

    One value per request (not the pooled gaps of all requests: those need the token
    side table), so its percentiles are percentiles over requests."""
    return _ok_only(c, c.itl_mean_ns)


@_metric(True, _NO_GAPS)
def itl_p99(c: Columns) -> np.ndarray:
    """itl_p99 = the request's own p99 gap between token events (nearest rank, ceil(0.99 n))."""
    return _ok_only(c, c.itl_p99_ns)


@_metric(True, _NO_GAPS)
def itl_max(c: Columns) -> np.ndarray:
    """itl_max = the request's longest gap between token events (a stall)."""
    return _ok_only(c, c.itl_max_ns)


@_metric(False, _CLOSED_LOOP)
def schedule_lag(c: Columns) -> np.ndarray:
    """schedule_lag = t_send - t_intended - connection_wait, every request sent: the
    generator's own lateness. The wait for a free connection is the target's (it held every
    connection the pool may open) and is a metric of its own; both count in
    latency_corrected. A run saved before connection_wait existed has it as 0.

    A request the run's end interrupted before it was written has no send time: it is left
    out rather than charged as lag."""
    waited = np.nan_to_num(c.connection_wait, nan=0.0)
    return np.where(c.unsent, np.nan, c.t_send - c.t_intended - waited)


@_metric(False, "the samples predate the connection_wait column")
def connection_wait(c: Columns) -> np.ndarray:
    """connection_wait = the time a request waited for a free connection (HTTP/2: stream)
    before its first byte, every request sent; 0 when one was free at once."""
    return np.where(c.unsent, np.nan, c.connection_wait)


@_metric(False, "the target sent no X-Request-Received-Time/X-Request-Dispatch-Time headers")
def server_queue(c: Columns) -> np.ndarray:
    """server_queue = (srv_dispatch - srv_received) * 1e9, server clock only."""
    return (c.srv_dispatch - c.srv_received) * NS_PER_S


def _srv_relative_ns(c: Columns, epoch_s: np.ndarray) -> np.ndarray:
    """Server epoch seconds -> ns since the run's start on the epoch clock.

    The whole seconds of start_epoch_ns are subtracted first, so float64 keeps the
    header's microsecond digits instead of rounding 1.7e18 ns to 256 ns steps."""
    base_s = c.start_epoch_ns // NS_PER_S
    return (epoch_s - base_s) * NS_PER_S - (c.start_epoch_ns - base_s * NS_PER_S)


@_metric(True, "the target sent no X-Request-Start-Time header")
def dispatch_delay(c: Columns) -> np.ndarray:
    """dispatch_delay = srv_start - (start_epoch_ns + t_send + clock_offset_ns).

    The client's send time mapped to the server's epoch clock (offset 0 on one host)."""
    return _ok_only(c, _srv_relative_ns(c, c.srv_start) - (c.t_send + c.clock_offset_ns))


@_metric(False, "no request was refused (429/503/529)")
def time_to_reject(c: Columns) -> np.ndarray:
    """time_to_reject = t_end - t_send of refused requests (status 429, 503 or 529, or a
    refusal in disguise: a 2xx whose stream carried an overload error before any token)."""
    return np.where(c.refused, c.t_end - c.t_send, np.nan)


def dispatch_jitter(delay_ns: np.ndarray, t_send: np.ndarray) -> np.ndarray:
    """dispatch_jitter = population std (ddof 0) of dispatch_delay over consecutive windows.

    Requests with a dispatch_delay are taken in send order (t_send) and cut into windows
    of 100; a trailing partial window is dropped. One value per window (ns)."""
    defined = ~np.isnan(delay_ns)
    ordered = delay_ns[defined][np.argsort(t_send[defined], kind="stable")]
    windows = len(ordered) // JITTER_WINDOW
    if windows == 0:
        return np.empty(0)
    return ordered[: windows * JITTER_WINDOW].reshape(windows, JITTER_WINDOW).std(axis=1)


WINDOW_METRICS = ("dispatch_jitter",)
DURATION_METRICS: tuple[str, ...] = (*REQUEST_METRICS, *WINDOW_METRICS)
# Per-request metrics a goodput request must meet (upper bounds of SLOs on these): those of
# successful requests, and the server's queue time.
GOODPUT_METRICS = frozenset(
    {*(name for name, spec in REQUEST_METRICS.items() if spec.ok_only), "server_queue"}
)


def status_key(status: int, error: str | None) -> str:
    """The status-mix key of one request.

    "200", "503": an HTTP status (error null or http_<status>); "transport:timeout":
    status 0 with its error class; "200:bad_sse": an HTTP status with another error."""
    if status == 0:
        return f"transport:{error or 'unknown'}"
    if error is None or error == f"http_{status}":
        return str(status)
    return f"{status}:{error}"


class MetricValues(Mapping[str, np.ndarray]):
    """Every per-request metric by name (REQUEST_METRICS), computed from the columns when it
    is asked for: all held at once, the 16 metrics were 128 bytes a row beside the columns'
    139 (#44). The last few asked for are kept, as a summary asks for one several times in
    a row; each is read-only, as it may be handed out again."""

    KEPT = 2  # the outcomes read two at a time (ttft, server_queue)

    def __init__(self, columns: Columns) -> None:
        self._columns = columns
        self._kept: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        kept = self._kept
        values = kept.pop(name, None)
        if values is None:
            spec = REQUEST_METRICS[name]  # an unknown name is a KeyError, as in a dict
            # Stamps of 1e308 (a damaged file) overflow to infinity quietly: numpy's warning
            # would be a stray line on the terminal, or under a strict warnings filter an
            # exception, and infinity is already a value the analysis reads (an
            # error-adjusted failure).
            with np.errstate(over="ignore", invalid="ignore"):
                values = spec.func(self._columns)
            values.flags.writeable = False
        kept[name] = values  # the most recent last
        while len(kept) > self.KEPT:
            del kept[next(iter(kept))]
        return values

    def __iter__(self) -> Iterator[str]:
        return iter(REQUEST_METRICS)

    def __len__(self) -> int:
        return len(REQUEST_METRICS)


@dataclass(frozen=True)
class MetricFrame:
    """Per-request metric values (ns, NaN = undefined) with the grouping columns.

    Stages and request classes are kept as integer codes (`stages[i]`, `classes[i]`),
    so a group mask is one integer comparison."""

    columns: Columns
    stage: np.ndarray  # int32 stage index per request
    class_code: np.ndarray  # int32 index into `classes`
    classes: tuple[str, ...]  # sorted
    stages: tuple[int, ...]  # sorted
    status_keys: np.ndarray  # object array of str
    answers: np.ndarray  # int8: how the server answered (zqbench.metrics.classify.ANSWERS)
    retry_after_s: np.ndarray  # float64: a refusal's Retry-After in s, NaN when none
    values: Mapping[str, np.ndarray]  # MetricValues: computed when asked for
    # float64 token counts from the responses' usage, NaN when not given (prefix_cache.py)
    prompt_tokens: np.ndarray
    cached_tokens: np.ndarray
    # float64 a sessions run's conversation and turn per request, NaN outside one (sessions.py)
    session: np.ndarray
    turn: np.ndarray
    # bool: sent again on a new connection (the transport's one resend); False when absent
    resent: np.ndarray
    # What each answer carried (Sample.carried's bits; 0 when absent), its thinking tokens
    # (NaN: none, or not recorded) and whether the server counted them, its tool calls
    # (sections/reasoning.py)
    carried: np.ndarray
    reasoning_tokens: np.ndarray
    reasoning_from_usage: np.ndarray
    tool_calls: np.ndarray
    # Each request's outcome (zqbench.metrics.outcomes); None: the run judged none (a run
    # saved before zqbench judged outcomes)
    outcomes: Classified | None = None

    @property
    def n(self) -> int:
        return len(self.stage)

    def listed_metrics(self) -> tuple[str, ...]:
        """The metrics summary.json lists: all, but `ttfa` only where an answer carried
        thinking or a tool call. Elsewhere it equals ttft (a file need not say so twice, and
        one written before ttfa existed re-gates unchanged); its SLOs are judged either way."""
        if np.any(self.carried & (THINKING | TOOL)):
            return DURATION_METRICS
        return tuple(name for name in DURATION_METRICS if name != "ttfa")

    @property
    def ok(self) -> np.ndarray:
        return self.columns.ok

    def mask(self, stage: int | None = None, request_class: str | None = None) -> np.ndarray:
        keep = np.ones(self.n, dtype=bool)
        if stage is not None:
            keep &= self.stage == stage
        if request_class is not None:
            if request_class not in self.classes:
                return np.zeros(self.n, dtype=bool)
            keep &= self.class_code == self.classes.index(request_class)
        return keep

    def sorted_seconds(self, name: str, keep: np.ndarray | None = None) -> np.ndarray:
        """Ascending defined values of a duration metric in seconds (inf kept)."""
        keep = np.ones(self.n, dtype=bool) if keep is None else keep
        if name == "dispatch_jitter":
            raw = dispatch_jitter(self.values["dispatch_delay"][keep], self.columns.t_send[keep])
        else:
            raw = self.values[name][keep]
            raw = raw[~np.isnan(raw)]
        return np.sort(raw) / NS_PER_S

    def sorted_counts(self, name: str) -> np.ndarray:
        """Ascending per-request counts (`reasoning_tokens`) of the successful requests
        that have one."""
        counts = {"reasoning_tokens": self.reasoning_tokens}[name]
        return np.sort(counts[self.ok & ~np.isnan(counts)])

    def grouped_sorted_seconds(
        self, name: str
    ) -> tuple[np.ndarray, dict[int, np.ndarray], dict[str, np.ndarray]]:
        """(overall, by stage, by class) ascending seconds, from ONE sort of the metric:
        filtering an ascending array keeps it ascending."""
        if name == "dispatch_jitter":  # windows are cut within each group
            return (
                self.sorted_seconds(name),
                {s: self.sorted_seconds(name, self.mask(stage=s)) for s in self.stages},
                {c: self.sorted_seconds(name, self.mask(request_class=c)) for c in self.classes},
            )
        raw = self.values[name]
        defined = np.flatnonzero(~np.isnan(raw))
        order = defined[np.argsort(raw[defined])]
        overall = raw[order] / NS_PER_S
        if len(self.stages) == 1:
            by_stage = {self.stages[0]: overall}
        else:
            stage_of = self.stage[order]
            by_stage = {s: overall[stage_of == s] for s in self.stages}
        if len(self.classes) == 1:
            by_class = {self.classes[0]: overall}
        else:
            class_of = self.class_code[order]
            by_class = {c: overall[class_of == i] for i, c in enumerate(self.classes)}
        return overall, by_stage, by_class

    def unavailable_reason(self, name: str) -> str | None:
        """Why a duration metric has no value over the whole run; None when it has one."""
        if name == "dispatch_jitter":
            reason = self.unavailable_reason("dispatch_delay")
            if reason is not None:
                return reason
            defined = int(np.count_nonzero(~np.isnan(self.values["dispatch_delay"])))
            if defined < JITTER_WINDOW:
                return (
                    f"only {defined} requests carry X-Request-Start-Time;"
                    f" one jitter window needs {JITTER_WINDOW}"
                )
            return None
        spec = REQUEST_METRICS[name]
        if np.any(~np.isnan(self.values[name])):
            return None
        if self.n == 0:
            return "no request sent"
        if spec.ok_only and not np.any(self.ok):
            return "no successful request"
        return spec.missing


def _status_keys(status: np.ndarray, error: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(status key, answer) of every request, computed once per distinct (status, error)."""
    error_code, error_names = pd.factorize(error, use_na_sentinel=True)  # null -> -1
    pair = status.astype(np.int64) * (len(error_names) + 1) + (error_code + 1)
    pairs, inverse = np.unique(pair, return_inverse=True)
    keys, answers = [], []
    for value in pairs.tolist():
        code, err = divmod(value, len(error_names) + 1)
        name = None if err == 0 else str(error_names[err - 1])
        keys.append(status_key(code, name))
        answers.append(answer_of(code, name))
    return np.array(keys, dtype=object)[inverse], np.array(answers, dtype=np.int8)[inverse]


def build_frame(
    samples: Samples, *, start_epoch_ns: int = 0, clock_offset_ns: int = 0
) -> MetricFrame:
    """Derive every per-request metric column (vectorised; no per-row Python)."""
    c = columns_of(samples, start_epoch_ns=start_epoch_ns, clock_offset_ns=clock_offset_ns)
    class_code, class_names = pd.factorize(samples["request_class"].astype(str), sort=True)
    stage = samples["stage"].to_numpy(dtype=np.int32)  # the samples' type: a stage index
    status_keys, answers = _status_keys(c.status, samples["error"])
    return MetricFrame(
        columns=c,
        stage=stage,
        class_code=class_code.astype(np.int32),
        classes=tuple(str(name) for name in class_names),
        stages=tuple(int(s) for s in np.unique(stage)),
        status_keys=status_keys,
        answers=answers,
        values=MetricValues(c),
        retry_after_s=float_column(samples, "retry_after_s"),
        prompt_tokens=float_column(samples, "prompt_tokens"),
        cached_tokens=float_column(samples, "cached_tokens"),
        session=float_column(samples, "session"),
        turn=float_column(samples, "turn"),
        resent=bool_column(samples, "resent"),
        carried=np.nan_to_num(float_column(samples, "carried")).astype(np.int64),
        reasoning_tokens=float_column(samples, "reasoning_tokens"),
        reasoning_from_usage=bool_column(samples, "reasoning_from_usage"),
        tool_calls=np.nan_to_num(float_column(samples, "tool_calls")).astype(np.int64),
    )


def goodput_count(frame: MetricFrame, bounds: Iterable[tuple[str, str, float]]) -> int:
    """Successful requests meeting every per-request bound (metric, '<' or '<=', seconds).

    A request with no value for a bounded metric (e.g. no first token) does not count.
    With no bounds, every successful request counts."""
    good = frame.ok.copy()
    for metric, op, threshold_s in bounds:
        values = frame.values[metric] / NS_PER_S
        with np.errstate(invalid="ignore"):
            good &= values < threshold_s if op == "<" else values <= threshold_s
    return int(np.count_nonzero(good))
