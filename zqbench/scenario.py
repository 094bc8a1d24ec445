"""Scenario files: load a TOML scenario, validate every key, and scale it.

The format is docs/design.md "Scenario files"; docs/scenarios.md documents every key
for users. A scenario is data only; its `[load]` table is parsed by the executor it names
(`zqbench.load`), whose `LoadSpec` plans the run.

Normalisation, so that the schedule code has one shape to read:

- every executor has `stages`; a constant executor has exactly one flat stage
  (`start_rate == stages[0].target`, or `start_vus == stages[0].target`);
- `duration_s` is always the total of the stages;
- a single `prompt_tokens = N` becomes one request class named "default" with weight 1.

Durations must be strings with a unit ("500ms", "30s", "2m", "1h", "1m30s"). Bare numbers
are rejected: `timeout = 60` reads as seconds to one person and milliseconds to another.

Every problem raises `ScenarioError` with one line naming the file, the key, the value and
what is allowed. Unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from zqbench.dialects import DEFAULT_API, DIALECTS
from zqbench.dialects.base import Tools
from zqbench.dialects.tools import ToolsFileError, read_tools
from zqbench.errors import OptionError, ScenarioError
from zqbench.load import LOAD_KEYS, LoadSpec, TraceLoad, parse_load
from zqbench.load.bounds import MAX_PROMPT_TOKENS
from zqbench.redact import is_sensitive
from zqbench.stop.config import STOP_KEYS, StopConfig, parse_stop
from zqbench.strict_toml import Table, parse_duration, show

T = TypeVar("T")
D = TypeVar("D")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

APIS = tuple(DIALECTS)  # the registered dialects, in the registry's order
IMPAIRMENTS = ("packet-loss",)
DEFAULT_CLASS = "default"

_TOP_KEYS = (
    "name",
    "description",
    "api",
    "load",
    "request",
    "slo",
    "validity",
    "network",
    "sweep",
    "metrics",
    "outcomes",
    "stop",
)
_REQUEST_KEYS = (
    "max_tokens",
    "stream",
    "timeout",
    "prompt_tokens",
    "mix",
    "cold_connections",
    "dataset",
    "shared_prefix",
    "tools",
    "tool_choice",
    "thinking_budget",
)
TOOL_CHOICES = ("auto", "any", "none")  # or a tool's name
_SHARED_PREFIX_KEYS = ("prefixes", "prefix_tokens", "suffix_tokens")
_DATASET_KEYS = ("path", "format", "order", "prompt_tokens", "output_tokens", "force_output")
DATASET_FORMATS = ("auto", "jsonl", "chat-completions", "sharegpt")
DATASET_ORDERS = ("sequential", "shuffle")
_MIX_KEYS = ("name", "weight", "prompt_tokens", "max_tokens", "headers")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
_SLO_KEYS = ("checks",)
_NETWORK_KEYS = ("impairment", "loss", "stages")
_VALIDITY_KEYS = (
    "min_samples",
    "max_schedule_lag",
    "max_client_lag",
    "min_achieved_ratio",
    "min_ratio_samples",
)
_METRICS_KEYS = ("port", "host")
_OUTCOMES_KEYS = (
    "server_queue",
    "margin",
    "at_rest_probes",
    "retry_after_follow_ups",
    "retry_after_attempts",
)
MAX_AT_REST_PROBES = 20  # per prompt size: each is a request before the load
MAX_RETRY_AFTER_FOLLOW_UPS = 100  # refusals followed per run: extra traffic, kept small
MAX_RETRY_AFTER_ATTEMPTS = 10
MAX_GRACEFUL_STOP_S = 24 * 3600.0  # --graceful-stop: a day is past any answer worth waiting for
DEFAULT_RETRY_AFTER_ATTEMPTS = 3
_SWEEP_KEYS = ("min_rate", "max_rate", "step_factor", "step_duration", "bisect_steps")

_DEFAULT_MAX_TOKENS = 256
_DEFAULT_PROMPT_TOKENS = 32
_DEFAULT_TIMEOUT_S = parse_duration("60s")


@dataclass(frozen=True, slots=True)
class RequestClass:
    name: str
    weight: float
    prompt_tokens: int
    max_tokens: int | None  # None: use RequestConfig.max_tokens
    # HTTP headers this class's requests carry besides the run's (e.g. X-Stream-Mode)
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DatasetConfig:
    """`[request.dataset]`: requests read from a file (`zqbench.sources.dataset`)."""

    path: str  # absolute: a scenario's relative path is from the scenario's folder
    format: str = "auto"  # DATASET_FORMATS
    order: str = "sequential"  # or "shuffle" (by the run's seed)
    prompt_tokens: tuple[int, int] | None = None  # keep rows whose prompt is in [min, max]
    output_tokens: tuple[int, int] | None = None  # ... whose output length is in [min, max]
    force_output: bool = True  # ask for exactly the row's output length, where the API can


@dataclass(frozen=True, slots=True)
class SharedPrefixConfig:
    """`[request.shared_prefix]`: groups of prompts that share a prefix
    (`zqbench.sources.shared_prefix`)."""

    prefixes: int  # groups
    prefix_tokens: int  # shared by the group's requests
    suffix_tokens: int  # each request's own


@dataclass(frozen=True, slots=True)
class RequestConfig:
    max_tokens: int
    stream: bool
    timeout_s: float
    mix: tuple[RequestClass, ...]
    cold_connections: bool = False  # a new connection per request
    dataset: DatasetConfig | None = None  # None: synthetic prompts of the mix's sizes
    shared_prefix: SharedPrefixConfig | None = None
    tools: Tools | None = None  # offered with every request (a tool-calling workload)
    thinking_budget: int | None = None  # ask the model to think first, at most this many tokens

    def max_tokens_for(self, cls: RequestClass) -> int:
        return self.max_tokens if cls.max_tokens is None else cls.max_tokens


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    impairment: str  # one of IMPAIRMENTS
    loss: float  # fraction of packets dropped, 0 < loss <= 1
    stages: tuple[int, ...]  # indexes into the load's stages where the impairment applies


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """`zqbench sweep`: search the highest constant rate at which the SLOs hold."""

    min_rate: float = 1.0  # req/s of the first step; it must pass for a knee to exist
    max_rate: float = 1000.0  # the ramp stops here
    step_factor: float = 2.0  # ramp: each step's rate is the last one's times this
    step_duration_s: float = 10.0  # every step is a constant-rate run this long
    bisect_steps: int = 3  # steps spent between the last pass and the first fail


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """`[metrics]`: serve the run so far as a Prometheus exposition (`--metrics-port`)."""

    port: int  # 0: any free port, printed at the start
    host: str | None = None  # None: loopback (zqbench.exporter.DEFAULT_HOST)


@dataclass(frozen=True, slots=True)
class OutcomesConfig:
    """`[outcomes]`: how each request is judged served, queued or refused (docs/metrics.md,
    "Outcomes"). None keeps zqbench's default (zqbench.metrics.classify.DEFAULT_RULES)."""

    server_queue_s: float | None = None  # admitted with timing headers: queued past this
    margin_s: float | None = None  # without headers: the least allowance past 2x at rest
    at_rest_probes: int | None = None  # set-up probes per prompt size (0: none)
    # Refusals followed at their Retry-After (zqbench.engines.follow_up); 0: none (opt-in)
    retry_after_follow_ups: int = 0
    retry_after_attempts: int = DEFAULT_RETRY_AFTER_ATTEMPTS  # tries per followed refusal


@dataclass(frozen=True, slots=True)
class ValidityConfig:
    """`[validity]`: when a run is invalid rather than slow. None keeps zqbench's default
    (zqbench.metrics.summarize.ValidityThresholds); a smoke test may lower min_samples."""

    min_samples: int | None = None  # requests sent
    max_schedule_lag_s: float | None = None  # schedule_lag p99 limit
    max_client_lag_s: float | None = None  # the client's loop lag p99 limit (client_lag)
    min_achieved_ratio: float | None = None  # achieved / offered load
    min_ratio_samples: int | None = None  # per class, for p99/p50 ratios


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    api: str
    load: LoadSpec
    request: RequestConfig
    slo: tuple[str, ...]
    network: NetworkConfig | None
    source: str  # the file it came from
    sweep: SweepConfig | None = None
    validity: ValidityConfig = ValidityConfig()
    metrics: MetricsConfig | None = None
    outcomes: OutcomesConfig = OutcomesConfig()
    stop: StopConfig = dataclasses.field(default_factory=StopConfig)  # [stop]: no rules

    def scaled(self, rate_scale: float = 1.0, duration_scale: float = 1.0) -> Scenario:
        """Multiply every rate (or VU count) by `rate_scale` and every stage by `duration_scale`.

        VU counts are rounded to whole VUs. Think time, graceful stop and the request timeout
        are per-request behaviour and stay as they are.
        """
        for option, value in (("rate_scale", rate_scale), ("duration_scale", duration_scale)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise OptionError(option, "must be a number > 0", value=str(value))
        if rate_scale == 1.0 and duration_scale == 1.0:
            return self
        new_load = self.load.scaled(rate_scale, duration_scale, self.name)
        return dataclasses.replace(self, load=new_load)

    def with_overrides(
        self,
        *,
        api: str | None = None,
        max_tokens: int | None = None,
        stream: bool | None = None,
        timeout_s: float | None = None,
        graceful_stop_s: float | None = None,
        arrivals: str | None = None,
        burstiness: float | None = None,
        dataset: str | None = None,
    ) -> Scenario:
        """Apply command-line overrides; None leaves a value as the file has it.

        `max_tokens` replaces the per-class values of a mix too: the user asked for that cap.
        """
        out = self
        if api is not None:
            if api not in APIS:
                raise OptionError("api", f"is not one of {', '.join(APIS)}", value=api)
            out = dataclasses.replace(out, api=api)
        req = out.request
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
                raise OptionError(
                    "max_tokens", "must be a whole number >= 1", value=str(max_tokens)
                )
            mix = tuple(dataclasses.replace(c, max_tokens=None) for c in req.mix)
            req = dataclasses.replace(req, max_tokens=max_tokens, mix=mix)
        if stream is not None:
            req = dataclasses.replace(req, stream=bool(stream))
        if timeout_s is not None:
            if not (math.isfinite(timeout_s) and timeout_s > 0):
                raise OptionError("timeout_s", "must be > 0", value=str(timeout_s))
            req = dataclasses.replace(req, timeout_s=float(timeout_s))
        if graceful_stop_s is not None:
            if not (math.isfinite(graceful_stop_s) and 0 <= graceful_stop_s <= MAX_GRACEFUL_STOP_S):
                raise OptionError(
                    "graceful_stop_s",
                    f"must be 0 to {MAX_GRACEFUL_STOP_S:g} s, e.g. 5s",
                    value=f"{graceful_stop_s:g} s",
                )
            # Every executor's LoadSpec is a frozen dataclass with this field (load/executor.py).
            load = dataclasses.replace(cast(Any, out.load), graceful_stop_s=float(graceful_stop_s))
            out = dataclasses.replace(out, load=load)
        if dataset is not None:
            # --dataset PATH: from the working directory; the file's other keys stay.
            if not Path(dataset).is_file():
                why = "not a regular file" if Path(dataset).exists() else "no such file"
                raise OptionError("dataset", f"{why}; give the dataset's path", value=dataset)
            if isinstance(out.load, TraceLoad):
                raise OptionError(
                    "dataset",
                    "the scenario replays a trace, whose rows are its requests: drop it",
                    value=dataset,
                )
            config = req.dataset or DatasetConfig(path="")
            req = dataclasses.replace(
                req,
                dataset=dataclasses.replace(config, path=str(Path(dataset).resolve())),
                shared_prefix=None,
                # One class: the dataset's rows are the prompts, whatever the mix said.
                mix=(RequestClass(DEFAULT_CLASS, 1.0, _DEFAULT_PROMPT_TOKENS, None),),
            )
        out = dataclasses.replace(out, request=req)
        if arrivals is not None or burstiness is not None:
            out = dataclasses.replace(out, load=out.load.with_arrivals(arrivals, burstiness))
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict for summary.json (durations in seconds, as the file's keys say)."""
        d = dataclasses.asdict(self)
        d["source"] = _shown_source(self.source)
        if self.request.dataset is not None:
            d["request"]["dataset"]["path"] = shown_path(self.request.dataset.path)
        if isinstance(self.load, TraceLoad):
            d["load"]["path"] = shown_path(self.load.path)
        # Tuples become lists so the dict equals its own JSON round trip.
        result: dict[str, Any] = json.loads(json.dumps(d))
        return result


# --------------------------------------------------------------------------- lookup


def _shown_source(source: str) -> str:
    """`bundled:NAME` for a bundled file: reports must not carry this machine's paths."""
    path = Path(source)
    for folder in _bundled_dirs():
        if path.parent == folder.resolve():
            return f"bundled:{path.stem}"
    return source


def shown_path(path: str) -> str:
    """`bundled:data/x.jsonl` for a file under the bundled scenarios' folder."""
    for folder in _bundled_dirs():
        if Path(path).is_relative_to(folder.resolve()):
            return f"bundled:{Path(path).relative_to(folder.resolve()).as_posix()}"
    return path


def _bundled_dirs() -> list[Path]:
    pkg = Path(__file__).resolve().parent
    # An installed wheel may carry the files as package data; a checkout has the top folder.
    return [d for d in (pkg / "_scenarios", pkg.parent / "scenarios") if d.is_dir()]


def _bundled_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in reversed(_bundled_dirs()):  # the first directory wins
        for f in sorted(d.glob("*.toml")):
            found[f.stem] = f
    return dict(sorted(found.items()))


def list_bundled() -> list[tuple[str, str]]:
    """(name, description) of every bundled scenario, sorted by name."""
    return [(name, load_scenario(name).description) for name in _bundled_files()]


def load_scenario(name_or_path: str) -> Scenario:
    """Load a bundled scenario by name ("burst") or a TOML file by path.

    An argument with a path separator or a ".toml" suffix is a path; anything else is a
    bundled name, so a stray file in the working directory never shadows a bundled scenario.
    """
    arg = str(name_or_path)
    if "/" in arg or "\\" in arg or arg.endswith(".toml"):
        path = Path(arg)
        if not path.is_file():
            # A folder, a device or a pipe exists but is no file to read (and /dev/zero never ends).
            if path.exists():
                raise ScenarioError(f"{arg}: not a regular file; give a scenario's .toml file")
            raise ScenarioError(f"{arg}: no such scenario file")
        return _load_file(path, arg)
    files = _bundled_files()
    if not _bundled_dirs():
        raise ScenarioError(
            f'unknown scenario "{arg}": no bundled scenarios folder was found next to the '
            "zqbench package; give a path to a .toml file"
        )
    if arg not in files:
        raise ScenarioError(
            f'unknown scenario "{arg}"; bundled scenarios: {", ".join(files) or "(none)"} '
            "(or give a path to a .toml file)"
        )
    path = files[arg]
    return _load_file(path, f"{path.parent.name}/{path.name}")


def _load_file(path: Path, label: str) -> Scenario:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ScenarioError(f"{label}: cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"at line (\d+)", msg)
        where = f" line {m.group(1)}:" if m else ""
        raise ScenarioError(f"{label}:{where} invalid TOML: {msg}") from None
    return parse_scenario(data, label, default_name=path.stem, source=str(path.resolve()))


# --------------------------------------------------------------------------- parsing


def parse_scenario(
    data: Mapping[str, Any], label: str, *, default_name: str, source: str
) -> Scenario:
    """Validate a parsed TOML document; `label` names the file in error messages."""
    top = Table(label, "", data, _TOP_KEYS)
    name = top.string("name", default_name) or default_name
    description = top.string("description", "") or ""
    api = top.choice("api", APIS, DEFAULT_API) or DEFAULT_API
    if not top.has("load"):
        raise ScenarioError(f"{label}: the [load] table is missing")
    load = parse_load(Table(label, "load", data["load"], LOAD_KEYS), Path(source).parent)
    request = _parse_request(
        Table(label, "request", data.get("request", {}), _REQUEST_KEYS), Path(source).parent
    )
    _check_trace_request(label, load, data.get("request", {}))

    def table(key: str, keys: tuple[str, ...], parse: Callable[[Table], T], default: T) -> T:
        """The optional top-level table `key`, parsed; `default` when the file has none."""
        return parse(Table(label, key, data[key], keys)) if top.has(key) else default

    slo: tuple[str, ...] = table("slo", _SLO_KEYS, _parse_slo, ())
    _check_stage_mixes(label, load, request)
    return Scenario(
        name,
        description,
        api,
        load,
        request,
        slo,
        table("network", _NETWORK_KEYS, lambda t: _parse_network(t, load), None),
        source,
        table("sweep", _SWEEP_KEYS, _parse_sweep, None),
        table("validity", _VALIDITY_KEYS, _parse_validity, ValidityConfig()),
        table("metrics", _METRICS_KEYS, _parse_metrics, None),
        table("outcomes", _OUTCOMES_KEYS, _parse_outcomes, OutcomesConfig()),
        table("stop", STOP_KEYS, parse_stop, StopConfig()),
    )


def _parse_outcomes(t: Table) -> OutcomesConfig:
    probes = _at_most(t, "at_rest_probes", 0, MAX_AT_REST_PROBES, "probes per prompt size")
    follow_ups = _at_most(
        t, "retry_after_follow_ups", 0, MAX_RETRY_AFTER_FOLLOW_UPS, "refusals followed per run"
    )
    attempts = _at_most(
        t, "retry_after_attempts", 1, MAX_RETRY_AFTER_ATTEMPTS, "tries per followed refusal"
    )
    return OutcomesConfig(
        server_queue_s=(
            t.duration("server_queue", positive=True) if t.has("server_queue") else None
        ),
        margin_s=t.duration("margin") if t.has("margin") else None,
        at_rest_probes=probes,
        retry_after_follow_ups=0 if follow_ups is None else follow_ups,
        retry_after_attempts=DEFAULT_RETRY_AFTER_ATTEMPTS if attempts is None else attempts,
    )


def _at_most(t: Table, name: str, minimum: int, maximum: int, what: str) -> int | None:
    """A whole number from `minimum` to `maximum` (`what` it counts), or None when absent."""
    if not t.has(name):
        return None
    value = t.integer(name, minimum=minimum)
    if value > maximum:
        raise t.fail(name, f"must be at most {maximum} ({what})")
    return value


def _parse_metrics(t: Table) -> MetricsConfig:
    t.require("port", why=": the port to serve the run's metrics on (0: any free one)")
    port = t.integer("port", minimum=0)
    if port > 65535:
        raise t.fail("port", "must be a TCP port, 0-65535")
    host = t.string("host")
    if host is not None and not host.strip():
        raise t.fail("host", 'must be an address to listen on, e.g. "127.0.0.1"')
    return MetricsConfig(port=port, host=host)


def _check_trace_request(label: str, load: LoadSpec, request: Mapping[str, Any]) -> None:
    """A trace's rows are its requests: no [request] key may say what the prompts are."""
    if not isinstance(load, TraceLoad):
        return
    for key in ("dataset", "shared_prefix", "mix", "prompt_tokens"):
        if key in request:
            raise ScenarioError(
                f'{label}: request.{key} and load.executor = "trace" are exclusive; the '
                "trace's rows make the prompts"
            )


def _check_stage_mixes(label: str, load: LoadSpec, request: RequestConfig) -> None:
    """Per-stage mixes name classes of the mix (the executor allowed them or refused)."""
    names = [c.name for c in request.mix]
    for i, stage in enumerate(load.stages):
        unknown = [n for n in stage.mix or () if n not in names]
        if unknown:
            key = f"load.stages[{i}].mix = {show(list(stage.mix or ()))}"
            raise ScenarioError(
                f'{label}: {key} names class "{unknown[0]}", but the request classes are '
                f"{', '.join(names)}"
            )


def _parse_request(t: Table, folder: Path) -> RequestConfig:
    max_tokens = t.integer("max_tokens", minimum=1) if t.has("max_tokens") else _DEFAULT_MAX_TOKENS
    stream = t.boolean("stream", True)
    timeout = t.duration("timeout", positive=True) if t.has("timeout") else _DEFAULT_TIMEOUT_S
    cold = t.boolean("cold_connections", False)
    if t.has("mix") and t.has("prompt_tokens"):
        raise ScenarioError(
            f"{t.label}: request.prompt_tokens and [[request.mix]] are exclusive; "
            "give one prompt size or a mix"
        )
    if t.has("mix"):
        mix = _parse_mix(t)
    else:
        tokens = _prompt_tokens(t) if t.has("prompt_tokens") else _DEFAULT_PROMPT_TOKENS
        mix = (RequestClass(DEFAULT_CLASS, 1.0, tokens, None),)
    sources = [k for k in ("dataset", "shared_prefix") if t.has(k)]
    for other in ("mix", "prompt_tokens", *sources[1:]):
        if sources and t.has(other):
            raise ScenarioError(
                f"{t.label}: request.{sources[0]} and request.{other} are exclusive; "
                f"the {sources[0].replace('_', ' ')} makes the prompts"
            )
    dataset = _parse_dataset(t, folder) if t.has("dataset") else None
    shared = None
    if t.has("shared_prefix"):
        s = Table(t.label, "request.shared_prefix", t.data["shared_prefix"], _SHARED_PREFIX_KEYS)
        s.require(*_SHARED_PREFIX_KEYS, why=f" (give {', '.join(_SHARED_PREFIX_KEYS)})")
        shared = SharedPrefixConfig(*(s.integer(k, minimum=1) for k in _SHARED_PREFIX_KEYS))
        _check_shared_prefix(s, shared)
    tools = _parse_tools(t, folder) if t.has("tools") else None
    if t.has("tool_choice") and tools is None:
        raise t.fail("tool_choice", "needs request.tools, the tools it chooses among")
    budget = t.integer("thinking_budget", minimum=1) if t.has("thinking_budget") else None
    smallest = min(max_tokens if c.max_tokens is None else c.max_tokens for c in mix)
    if budget is not None and budget >= smallest:
        raise t.fail(
            "thinking_budget", f"must be below max_tokens ({smallest}), which counts the thinking"
        )
    return RequestConfig(max_tokens, stream, timeout, mix, cold, dataset, shared, tools, budget)


def _parse_tools(t: Table, folder: Path) -> Tools:
    """`tools = "tools.json"` (zqbench.dialects.tools), and `tool_choice`: auto (the model
    may call one), any (it must call one), none, or the name of the one it must call."""
    path = t.string("tools") or ""
    try:
        offered = read_tools(folder / path)
    except ToolsFileError as exc:
        raise t.fail("tools", str(exc)) from None
    choice = t.string("tool_choice", "auto") or "auto"
    names = [tool.name for tool in offered]
    if choice not in TOOL_CHOICES and choice not in names:
        raise t.fail(
            "tool_choice", f"is not {', '.join(TOOL_CHOICES)} or a tool's name ({', '.join(names)})"
        )
    return Tools(offered, choice, named=choice not in TOOL_CHOICES)


def _parse_dataset(t: Table, folder: Path) -> DatasetConfig:
    """`dataset = "path"`, or a [request.dataset] table with a `path`."""
    raw = t.data["dataset"]
    d = Table(
        t.label, "request.dataset", {"path": raw} if isinstance(raw, str) else raw, _DATASET_KEYS
    )
    d.require("path", why=" (the dataset file)")
    path = d.string("path") or ""
    if not path:
        raise d.fail("path", "must name the dataset file")
    spans = {key: _token_range(d, key) for key in ("prompt_tokens", "output_tokens")}
    if not (folder / path).is_file():
        raise d.fail("path", f"names no file (from {folder}); give the dataset's path")
    return DatasetConfig(
        path=str((folder / path).resolve()),
        format=d.choice("format", DATASET_FORMATS, "auto") or "auto",
        order=d.choice("order", DATASET_ORDERS, "sequential") or "sequential",
        prompt_tokens=spans["prompt_tokens"],
        output_tokens=spans["output_tokens"],
        force_output=d.boolean("force_output", True),
    )


def _token_range(d: Table, key: str) -> tuple[int, int] | None:
    """[min, max] tokens, whole numbers, 0 <= min <= max."""
    if not d.has(key):
        return None
    raw = d.data[key]
    ok = (
        isinstance(raw, list)
        and len(raw) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in raw)
        and 0 <= raw[0] <= raw[1]
    )
    if not ok:
        raise d.fail(key, "must be [min, max] tokens: whole numbers, 0 <= min <= max")
    return (raw[0], raw[1])


MAX_SHARED_PREFIX_TOKENS = 256 * 2**20  # the prefixes' text is held in memory, a byte a token


def _check_shared_prefix(t: Table, shared: SharedPrefixConfig) -> None:
    """Every prefix is written out before the first request: their tokens are bounded, and
    a prompt stays within any model's context."""
    if shared.prefix_tokens + shared.suffix_tokens > MAX_PROMPT_TOKENS:
        raise t.fail(
            "prefix_tokens",
            f"+ suffix_tokens is more than {MAX_PROMPT_TOKENS:,} tokens, past any model's "
            "context (the largest, 10M); give a prompt the target's context holds",
        )
    if shared.prefixes * shared.prefix_tokens > MAX_SHARED_PREFIX_TOKENS:
        raise t.fail(
            "prefixes",
            f"x prefix_tokens is more than {MAX_SHARED_PREFIX_TOKENS:,} tokens of prefix text, "
            "which zqbench writes out before the first request; use fewer or shorter prefixes",
        )


def _prompt_tokens(t: Table) -> int:
    tokens = t.integer("prompt_tokens", minimum=1)
    if tokens > MAX_PROMPT_TOKENS:
        raise t.fail(
            "prompt_tokens",
            f"is more than {MAX_PROMPT_TOKENS:,} tokens, past any model's context (the "
            "largest, 10M); give a prompt the target's context holds",
        )
    return tokens


def _parse_mix(t: Table) -> tuple[RequestClass, ...]:
    raw = t.data["mix"]
    if not isinstance(raw, list) or not raw:
        raise t.fail("mix", "must be a non-empty list of [[request.mix]] tables")
    classes: list[RequestClass] = []
    for i, item in enumerate(raw):
        c = Table(t.label, f"request.mix[{i}]", item, _MIX_KEYS)
        c.require("name", "weight", "prompt_tokens")
        name = c.string("name") or ""
        if not name.strip():
            raise c.fail("name", "must not be empty")
        if any(k.name == name for k in classes):
            raise c.fail("name", "repeats an earlier class name; names must be unique")
        weight = c.number("weight", strict=True)
        tokens = _prompt_tokens(c)
        max_tokens = c.integer("max_tokens", minimum=1) if c.has("max_tokens") else None
        headers = _class_headers(c) if c.has("headers") else ()
        classes.append(RequestClass(name, weight, tokens, max_tokens, headers))
    return tuple(classes)


def _class_headers(c: Table) -> tuple[tuple[str, str], ...]:
    """A class's `headers = { Name = "value" }`: HTTP header text, and never a credential
    (a scenario file is shared and its contents reach summary.json)."""
    raw = c.data["headers"]
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise c.fail(
            "headers", 'must be a table of strings, e.g. { "X-Stream-Mode" = "low-latency" }'
        )
    out = []
    for name, value in raw.items():
        text = name + value
        if (
            not _HEADER_NAME.fullmatch(name)
            or not text.isascii()
            or any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in value)
        ):
            raise c.fail("headers", f"holds {name!r}: not an HTTP header name and ASCII value")
        if is_sensitive(name):
            raise c.fail(
                "headers",
                f"holds {name!r}, a credential: pass keys with --api-key-env or --header, "
                "never in a scenario file",
            )
        out.append((name, value))
    return tuple(out)


def _parse_slo(t: Table) -> tuple[str, ...]:
    if not t.has("checks"):
        return ()
    raw = t.data["checks"]
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise t.fail("checks", 'must be a list of SLO strings such as "latency:p99<100ms"')
    # The SLO language itself is parsed and validated by the SLO gate.
    return tuple(x.strip() for x in raw)


def _parse_network(t: Table, load: LoadSpec) -> NetworkConfig:
    t.require("impairment", why=f" (one of {', '.join(IMPAIRMENTS)})")
    t.choice("impairment", IMPAIRMENTS)  # raises unless it is one of them
    impairment: str = t.data["impairment"]
    t.require("loss", why=' (the fraction of packets dropped, e.g. 0.1, for "packet-loss")')
    loss = t.number("loss", strict=True)
    if loss > 1:
        raise t.fail("loss", "must be a fraction of packets, 0 < loss <= 1")
    n = len(load.stages)
    if not t.has("stages"):
        stages = tuple(range(n))
    else:
        raw = t.data["stages"]
        ok = (
            isinstance(raw, list)
            and raw
            and all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
        )
        if not ok:
            raise t.fail("stages", "must be a non-empty list of stage indexes (0 = first stage)")
        bad = [x for x in raw if not 0 <= x < n]
        if bad:
            raise t.fail("stages", f"names stage {bad[0]}, but load has stages 0..{n - 1}")
        stages = tuple(sorted(set(raw)))
    return NetworkConfig(impairment, loss, stages)


def _parse_validity(t: Table) -> ValidityConfig:
    ratio = None
    if t.has("min_achieved_ratio"):
        ratio = t.number("min_achieved_ratio", strict=True)
        if ratio > 1:
            raise t.fail("min_achieved_ratio", "must be a fraction of the offered load, 0 < r <= 1")
    return ValidityConfig(
        min_samples=t.integer("min_samples", minimum=1) if t.has("min_samples") else None,
        max_schedule_lag_s=(
            t.duration("max_schedule_lag", positive=True) if t.has("max_schedule_lag") else None
        ),
        max_client_lag_s=(
            t.duration("max_client_lag", positive=True) if t.has("max_client_lag") else None
        ),
        min_achieved_ratio=ratio,
        min_ratio_samples=(
            t.integer("min_ratio_samples", minimum=2) if t.has("min_ratio_samples") else None
        ),
    )


def _parse_sweep(t: Table) -> SweepConfig:
    d = SweepConfig()
    min_rate = t.number("min_rate", strict=True) if t.has("min_rate") else d.min_rate
    max_rate = t.number("max_rate", strict=True) if t.has("max_rate") else d.max_rate
    if max_rate < min_rate:
        raise t.fail("max_rate", f"must be >= sweep.min_rate ({min_rate:g})")
    factor = t.number("step_factor", minimum=1.0, strict=True) if t.has("step_factor") else None
    duration = t.duration("step_duration", positive=True) if t.has("step_duration") else None
    bisect = t.integer("bisect_steps", minimum=0) if t.has("bisect_steps") else d.bisect_steps
    return SweepConfig(
        min_rate=min_rate,
        max_rate=max_rate,
        step_factor=d.step_factor if factor is None else factor,
        step_duration_s=d.step_duration_s if duration is None else duration,
        bisect_steps=bisect,
    )
