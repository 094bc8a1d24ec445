"""Scenario files: load a TOML scenario, validate every key, and scale it.

The format is docs/design.md "Scenario files"; docs/scenarios.md documents every key
for users. A scenario is data only: `zqbench.load.open_loop` turns its `LoadConfig` into
intended send times, `zqbench.load.closed_loop` into a virtual-user plan.

Normalisation, so that the schedule code has one shape to read:

- every executor has `stages`; a constant executor has exactly one flat stage
  (`start_rate == rate == stages[0].target`, or `start_vus == vus == stages[0].target`);
- `duration_s` is always the total of the stages;
- a single `prompt_tokens = N` becomes one request class named "default" with weight 1.

Durations must be strings with a unit ("500ms", "30s", "2m", "1h", "1m30s"). Bare numbers
are rejected: `timeout = 60` reads as seconds to one person and milliseconds to another.

Every problem raises `ScenarioError` with one line naming the file, the key, the value and
what is allowed. Unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from zqbench.dialects import DEFAULT_API, DIALECTS
from zqbench.errors import OptionError, ScenarioError

T = TypeVar("T")
D = TypeVar("D")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EXECUTORS = ("constant-arrival-rate", "ramping-arrival-rate", "constant-vus", "ramping-vus")
ARRIVAL_EXECUTORS = ("constant-arrival-rate", "ramping-arrival-rate")
VU_EXECUTORS = ("constant-vus", "ramping-vus")
ARRIVALS = ("uniform", "poisson", "gamma")
APIS = tuple(DIALECTS)  # the registered dialects, in the registry's order
IMPAIRMENTS = ("packet-loss",)
DEFAULT_CLASS = "default"

# Keys each executor takes; anything else in [load] is an error that says which executor
# would take it (a known key) or which key was probably meant (a typo).
_EXECUTOR_KEYS: dict[str, tuple[str, ...]] = {
    "constant-arrival-rate": ("rate", "duration", "arrivals", "burstiness", "graceful_stop"),
    "ramping-arrival-rate": ("start_rate", "stages", "arrivals", "burstiness", "graceful_stop"),
    "constant-vus": ("vus", "duration", "think_time", "graceful_stop"),
    "ramping-vus": ("start_vus", "stages", "think_time", "graceful_stop"),
}
_LOAD_KEYS = ("executor", *sorted({k for keys in _EXECUTOR_KEYS.values() for k in keys}))
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
)
_STAGE_KEYS = ("duration", "target", "name", "mix")
_REQUEST_KEYS = ("max_tokens", "stream", "timeout", "prompt_tokens", "mix", "cold_connections")
_MIX_KEYS = ("name", "weight", "prompt_tokens", "max_tokens")
_SLO_KEYS = ("checks",)
_NETWORK_KEYS = ("impairment", "loss", "stages")
_VALIDITY_KEYS = ("min_samples", "max_schedule_lag", "min_achieved_ratio", "min_ratio_samples")
_SWEEP_KEYS = ("min_rate", "max_rate", "step_factor", "step_duration", "bisect_steps")

_DEFAULT_MAX_TOKENS = 256
_DEFAULT_PROMPT_TOKENS = 32
_DEFAULT_TIMEOUT = "60s"
_DEFAULT_GRACEFUL_STOP = "30s"  # k6's default gracefulStop

_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_DURATION_FULL = re.compile(r"(?:\d+(?:\.\d+)?(?:us|ms|s|m|h))+")


@dataclass(frozen=True, slots=True)
class Stage:
    """Ramp linearly from the previous target (or the start value) to `target` over `duration_s`.

    `target` is requests per second for the arrival-rate executors, virtual users for the
    vus executors (then a whole number).
    """

    duration_s: float
    target: float
    name: str | None = None
    # Names of the request classes this stage draws from (weights renormalised among
    # them); None: the whole mix. Arrival-rate executors only.
    mix: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class LoadConfig:
    executor: str  # one of EXECUTORS
    start_rate: float | None  # arrival-rate executors: the rate at t = 0 (req/s)
    stages: tuple[Stage, ...]  # always at least one; a constant executor has one flat stage
    arrivals: str | None  # arrival-rate executors: uniform | poisson | gamma
    burstiness: float | None  # gamma only: the gamma shape (1 = Poisson, < 1 burstier)
    rate: float | None  # constant-arrival-rate only (req/s)
    duration_s: float  # total of the stages
    vus: int | None  # constant-vus only
    start_vus: int | None  # vus executors: VUs at t = 0
    think_time_s: float | None  # vus executors: sleep after each request
    graceful_stop_s: float  # how long in-flight requests may finish after the end

    @property
    def open_loop(self) -> bool:
        return self.executor in ARRIVAL_EXECUTORS


@dataclass(frozen=True, slots=True)
class RequestClass:
    name: str
    weight: float
    prompt_tokens: int
    max_tokens: int | None  # None: use RequestConfig.max_tokens


@dataclass(frozen=True, slots=True)
class RequestConfig:
    max_tokens: int
    stream: bool
    timeout_s: float
    mix: tuple[RequestClass, ...]
    cold_connections: bool = False  # a new connection per request

    def max_tokens_for(self, cls: RequestClass) -> int:
        return self.max_tokens if cls.max_tokens is None else cls.max_tokens


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    impairment: str  # one of IMPAIRMENTS
    loss: float  # fraction of packets dropped, 0 < loss <= 1
    stages: tuple[int, ...]  # indexes into LoadConfig.stages where the impairment applies


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """`zqbench sweep`: search the highest constant rate at which the SLOs hold."""

    min_rate: float = 1.0  # req/s of the first step; it must pass for a knee to exist
    max_rate: float = 1000.0  # the ramp stops here
    step_factor: float = 2.0  # ramp: each step's rate is the last one's times this
    step_duration_s: float = 10.0  # every step is a constant-rate run this long
    bisect_steps: int = 3  # steps spent between the last pass and the first fail


@dataclass(frozen=True, slots=True)
class ValidityConfig:
    """`[validity]`: when a run is invalid rather than slow. None keeps zqbench's default
    (zqbench.metrics.summarize.ValidityThresholds); a smoke test may lower min_samples."""

    min_samples: int | None = None  # requests sent
    max_schedule_lag_s: float | None = None  # schedule_lag p99 limit
    min_achieved_ratio: float | None = None  # achieved / offered load
    min_ratio_samples: int | None = None  # per class, for p99/p50 ratios


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    api: str
    load: LoadConfig
    request: RequestConfig
    slo: tuple[str, ...]
    network: NetworkConfig | None
    source: str  # the file it came from
    sweep: SweepConfig | None = None
    validity: ValidityConfig = ValidityConfig()

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
        load = self.load
        vus_exec = load.executor in VU_EXECUTORS

        def target(x: float) -> float:
            return float(round(x * rate_scale)) if vus_exec else x * rate_scale

        stages = tuple(
            dataclasses.replace(
                st, duration_s=st.duration_s * duration_scale, target=target(st.target)
            )
            for st in load.stages
        )
        new_load = dataclasses.replace(
            load,
            stages=stages,
            duration_s=sum(s.duration_s for s in stages),
            start_rate=None if load.start_rate is None else load.start_rate * rate_scale,
            rate=None if load.rate is None else load.rate * rate_scale,
            vus=None if load.vus is None else round(load.vus * rate_scale),
            start_vus=None if load.start_vus is None else round(load.start_vus * rate_scale),
        )
        if new_load.vus is not None and new_load.vus < 1:
            raise OptionError(
                "rate_scale",
                f"leaves {self.name} with {load.vus} x {rate_scale} < 1 virtual user",
                value=str(rate_scale),
            )
        return dataclasses.replace(self, load=new_load)

    def with_overrides(
        self,
        *,
        api: str | None = None,
        max_tokens: int | None = None,
        stream: bool | None = None,
        timeout_s: float | None = None,
        arrivals: str | None = None,
        burstiness: float | None = None,
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
        out = dataclasses.replace(out, request=req)
        if arrivals is not None or burstiness is not None:
            load = out.load
            if not load.open_loop:
                raise OptionError(
                    "arrivals", f"applies to arrival-rate executors, not {load.executor}"
                )
            arr = arrivals if arrivals is not None else load.arrivals
            if arr not in ARRIVALS:
                raise OptionError("arrivals", f"is not one of {', '.join(ARRIVALS)}", value=arr)
            burst = burstiness if burstiness is not None else load.burstiness
            if arr == "gamma":
                if burst is None or not (math.isfinite(burst) and burst > 0):
                    raise OptionError("burstiness", "must be > 0 with gamma arrivals")
            else:
                if burstiness is not None:
                    raise OptionError("burstiness", "applies only to gamma arrivals")
                burst = None
            out = dataclasses.replace(
                out, load=dataclasses.replace(load, arrivals=arr, burstiness=burst)
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict for summary.json (durations in seconds, as the file's keys say)."""
        d = dataclasses.asdict(self)
        d["source"] = _shown_source(self.source)
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


def _show(value: Any) -> str:
    """A value as the user wrote it in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, list, dict)):
        return json.dumps(value)
    return str(value)


class _Table:
    """One TOML table plus the file label and key prefix for messages."""

    def __init__(self, label: str, prefix: str, data: Any, allowed: tuple[str, ...]) -> None:
        self.label = label
        self.prefix = prefix
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{label}: {prefix} must be a table, got {_show(data)}")
        self.data = data
        for key in data:
            if key not in allowed:
                raise ScenarioError(self.unknown_key_message(key, allowed))

    def unknown_key_message(self, key: str, allowed: tuple[str, ...]) -> str:
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f'; did you mean "{self.key(close[0])}"?' if close else ""
        where = f"[{self.prefix}]" if self.prefix else "the top level"
        return (
            f'{self.label}: unknown key "{self.key(key)}"{hint} '
            f"(allowed in {where}: {', '.join(allowed)})"
        )

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.label}: {self.key(name)} = {_show(self.data[name])} {problem}")

    def missing(self, name: str, why: str = "") -> ScenarioError:
        return ScenarioError(f"{self.label}: {self.key(name)} is missing{why}")

    def has(self, name: str) -> bool:
        return name in self.data

    def string(self, name: str, default: str | None = None) -> str | None:
        return self._optional(name, str, default, "must be a string")

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str | None:
        v = self.string(name, default)
        if v is not None and v not in allowed:
            raise self.fail(name, f"is not one of {', '.join(allowed)}")
        return v

    def boolean(self, name: str, default: bool) -> bool:
        return self._optional(name, bool, default, "must be true or false")

    def _optional(self, name: str, kind: type[T], default: D, problem: str) -> T | D:
        """The key's value when it is a `kind`, `default` when the key is absent."""
        if name not in self.data:
            return default
        v = self.data[name]
        if not isinstance(v, kind):
            raise self.fail(name, problem)
        return v

    def number(self, name: str, *, minimum: float = 0.0, strict: bool = False) -> float:
        v = self.data[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.fail(name, "must be a number")
        if v < minimum or (strict and v == minimum):
            raise self.fail(name, f"must be {'>' if strict else '>='} {minimum:g}")
        return float(v)

    def integer(self, name: str, *, minimum: int) -> int:
        v = self.data[name]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(name, "must be a whole number")
        if v < minimum:
            raise self.fail(name, f"must be >= {minimum}")
        return v

    def duration(self, name: str, *, positive: bool = False) -> float:
        v = self.data[name]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            raise self.fail(
                name,
                'must be a string with a unit, e.g. "30s", "500ms", "2m" '
                "(a bare number could mean seconds or milliseconds)",
            )
        if not isinstance(v, str) or not _DURATION_FULL.fullmatch(v.strip()):
            raise self.fail(
                name, 'is not a duration; use a number with a unit us, ms, s, m or h, e.g. "30s"'
            )
        seconds = sum(float(n) * _UNIT_S[u] for n, u in _DURATION_PART.findall(v))
        if positive and seconds <= 0:
            raise self.fail(name, "must be longer than 0s")
        return seconds


def parse_duration(text: str) -> float:
    """Seconds in a duration string such as "500ms", "30s", "2m", "1h" or "1m30s"."""
    t = _Table("duration", "", {"value": text}, ("value",))
    return t.duration("value")


def parse_scenario(
    data: Mapping[str, Any], label: str, *, default_name: str, source: str
) -> Scenario:
    """Validate a parsed TOML document; `label` names the file in error messages."""
    top = _Table(label, "", data, _TOP_KEYS)
    name = top.string("name", default_name) or default_name
    description = top.string("description", "") or ""
    api = top.choice("api", APIS, DEFAULT_API) or DEFAULT_API
    if not top.has("load"):
        raise ScenarioError(f"{label}: the [load] table is missing")
    load = _parse_load(_Table(label, "load", data["load"], _LOAD_KEYS))
    request = _parse_request(_Table(label, "request", data.get("request", {}), _REQUEST_KEYS))
    slo: tuple[str, ...] = ()
    if top.has("slo"):
        slo = _parse_slo(_Table(label, "slo", data["slo"], _SLO_KEYS))
    _check_stage_mixes(label, load, request)
    network = None
    if top.has("network"):
        network = _parse_network(_Table(label, "network", data["network"], _NETWORK_KEYS), load)
    sweep = None
    if top.has("sweep"):
        sweep = _parse_sweep(_Table(label, "sweep", data["sweep"], _SWEEP_KEYS))
    validity = ValidityConfig()
    if top.has("validity"):
        validity = _parse_validity(_Table(label, "validity", data["validity"], _VALIDITY_KEYS))
    return Scenario(name, description, api, load, request, slo, network, source, sweep, validity)


def _parse_load(t: _Table) -> LoadConfig:
    if not t.has("executor"):
        raise t.missing("executor", f" (one of {', '.join(EXECUTORS)})")
    t.choice("executor", EXECUTORS)  # raises unless it is one of them
    executor: str = t.data["executor"]
    takes = _EXECUTOR_KEYS[executor]
    for key in t.data:
        if key != "executor" and key not in takes:
            raise ScenarioError(
                f"{t.label}: {t.key(key)} is not used by executor {executor} "
                f"(it takes {', '.join(takes)})"
            )
    open_loop = executor in ARRIVAL_EXECUTORS
    constant = executor.startswith("constant")

    def required(key: str) -> None:
        if not t.has(key):
            raise t.missing(key, f" (executor {executor} needs {', '.join(_required(executor))})")

    for key in _required(executor):
        required(key)

    if constant:
        duration = t.duration("duration", positive=True)
        if open_loop:
            level: float = t.number("rate", strict=True)
        else:
            level = float(t.integer("vus", minimum=1))
        stages: tuple[Stage, ...] = (Stage(duration, level, None),)
        start = level
    else:
        stages = _parse_stages(t, vus=not open_loop)
        if open_loop:
            start = t.number("start_rate") if t.has("start_rate") else 0.0
        else:
            start = float(t.integer("start_vus", minimum=0)) if t.has("start_vus") else 0.0

    arrivals = burstiness = None
    if open_loop:
        arrivals = t.choice("arrivals", ARRIVALS, "uniform")
        if arrivals == "gamma":
            if not t.has("burstiness"):
                raise t.missing(
                    "burstiness",
                    ' (arrivals = "gamma" needs it: the gamma shape, 1 = Poisson, < 1 burstier)',
                )
            burstiness = t.number("burstiness", strict=True)
        elif t.has("burstiness"):
            raise t.fail("burstiness", 'applies only to arrivals = "gamma"')
    think = None
    if not open_loop:
        think = t.duration("think_time") if t.has("think_time") else 0.0
    graceful = t.duration("graceful_stop") if t.has("graceful_stop") else None
    if graceful is None:
        graceful = parse_duration(_DEFAULT_GRACEFUL_STOP)

    return LoadConfig(
        executor=executor,
        start_rate=start if open_loop else None,
        stages=stages,
        arrivals=arrivals,
        burstiness=burstiness,
        rate=stages[0].target if constant and open_loop else None,
        duration_s=sum(s.duration_s for s in stages),
        vus=int(stages[0].target) if constant and not open_loop else None,
        start_vus=None if open_loop else int(start),
        think_time_s=think,
        graceful_stop_s=graceful,
    )


def _required(executor: str) -> tuple[str, ...]:
    return {
        "constant-arrival-rate": ("rate", "duration"),
        "ramping-arrival-rate": ("stages",),
        "constant-vus": ("vus", "duration"),
        "ramping-vus": ("stages",),
    }[executor]


def _parse_stages(t: _Table, *, vus: bool) -> tuple[Stage, ...]:
    raw = t.data["stages"]
    if not isinstance(raw, list) or not raw:
        raise t.fail("stages", 'must be a non-empty list of { duration = "30s", target = N }')
    stages = []
    for i, item in enumerate(raw):
        s = _Table(t.label, f"{t.prefix}.stages[{i}]", item, _STAGE_KEYS)
        for key in ("duration", "target"):
            if not s.has(key):
                raise s.missing(key)
        duration = s.duration("duration")
        target = float(s.integer("target", minimum=0)) if vus else s.number("target")
        stages.append(Stage(duration, target, s.string("name"), _stage_mix(s)))
    if sum(st.duration_s for st in stages) <= 0:
        raise ScenarioError(f"{t.label}: {t.key('stages')} last 0s in total; the run needs time")
    return tuple(stages)


def _stage_mix(s: _Table) -> tuple[str, ...] | None:
    """A stage's `mix = ["short", ...]`: the names only; checked against [request] later."""
    if not s.has("mix"):
        return None
    raw = s.data["mix"]
    if not (isinstance(raw, list) and raw and all(isinstance(x, str) and x for x in raw)):
        raise s.fail("mix", 'must be a non-empty list of request class names, e.g. ["short"]')
    if len(set(raw)) != len(raw):
        raise s.fail("mix", "names a class twice")
    return tuple(raw)


def _check_stage_mixes(label: str, load: LoadConfig, request: RequestConfig) -> None:
    """Per-stage mixes exist only on arrival-rate stages and name classes of the mix."""
    names = [c.name for c in request.mix]
    for i, stage in enumerate(load.stages):
        if stage.mix is None:
            continue
        key = f"load.stages[{i}].mix = {_show(list(stage.mix))}"
        if not load.open_loop:
            raise ScenarioError(
                f"{label}: {key}: a per-stage mix applies to arrival-rate executors only"
            )
        unknown = [n for n in stage.mix if n not in names]
        if unknown:
            raise ScenarioError(
                f'{label}: {key} names class "{unknown[0]}", but the request classes are '
                f"{', '.join(names)}"
            )


def _parse_request(t: _Table) -> RequestConfig:
    max_tokens = t.integer("max_tokens", minimum=1) if t.has("max_tokens") else _DEFAULT_MAX_TOKENS
    stream = t.boolean("stream", True)
    timeout = t.duration("timeout", positive=True) if t.has("timeout") else None
    if timeout is None:
        timeout = parse_duration(_DEFAULT_TIMEOUT)
    cold = t.boolean("cold_connections", False)
    if t.has("mix") and t.has("prompt_tokens"):
        raise ScenarioError(
            f"{t.label}: request.prompt_tokens and [[request.mix]] are exclusive; "
            "give one prompt size or a mix"
        )
    if t.has("mix"):
        mix = _parse_mix(t)
    else:
        tokens = (
            t.integer("prompt_tokens", minimum=1)
            if t.has("prompt_tokens")
            else _DEFAULT_PROMPT_TOKENS
        )
        mix = (RequestClass(DEFAULT_CLASS, 1.0, tokens, None),)
    return RequestConfig(max_tokens, stream, timeout, mix, cold)


def _parse_mix(t: _Table) -> tuple[RequestClass, ...]:
    raw = t.data["mix"]
    if not isinstance(raw, list) or not raw:
        raise t.fail("mix", "must be a non-empty list of [[request.mix]] tables")
    classes: list[RequestClass] = []
    for i, item in enumerate(raw):
        c = _Table(t.label, f"request.mix[{i}]", item, _MIX_KEYS)
        for key in ("name", "weight", "prompt_tokens"):
            if not c.has(key):
                raise c.missing(key)
        name = c.string("name") or ""
        if not name.strip():
            raise c.fail("name", "must not be empty")
        if any(k.name == name for k in classes):
            raise c.fail("name", "repeats an earlier class name; names must be unique")
        weight = c.number("weight", strict=True)
        tokens = c.integer("prompt_tokens", minimum=1)
        max_tokens = c.integer("max_tokens", minimum=1) if c.has("max_tokens") else None
        classes.append(RequestClass(name, weight, tokens, max_tokens))
    return tuple(classes)


def _parse_slo(t: _Table) -> tuple[str, ...]:
    if not t.has("checks"):
        return ()
    raw = t.data["checks"]
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise t.fail("checks", 'must be a list of SLO strings such as "latency:p99<100ms"')
    # The SLO language itself is parsed and validated by the SLO gate.
    return tuple(x.strip() for x in raw)


def _parse_network(t: _Table, load: LoadConfig) -> NetworkConfig:
    if not t.has("impairment"):
        raise t.missing("impairment", f" (one of {', '.join(IMPAIRMENTS)})")
    t.choice("impairment", IMPAIRMENTS)  # raises unless it is one of them
    impairment: str = t.data["impairment"]
    if not t.has("loss"):
        raise t.missing("loss", ' (the fraction of packets dropped, e.g. 0.1, for "packet-loss")')
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


def _parse_validity(t: _Table) -> ValidityConfig:
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
        min_achieved_ratio=ratio,
        min_ratio_samples=(
            t.integer("min_ratio_samples", minimum=2) if t.has("min_ratio_samples") else None
        ),
    )


def _parse_sweep(t: _Table) -> SweepConfig:
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
