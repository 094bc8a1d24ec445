"""Scenario loading: the bundled files, every validation error's exact message, scaling."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from zqbench.errors import OptionError, ScenarioError, UsageError
from zqbench.load import Stage
from zqbench.load.arrival_rate import ArrivalRateLoad
from zqbench.load.vus import VuLoad
from zqbench.scenario import (
    OutcomesConfig,
    RequestClass,
    ValidityConfig,
    list_bundled,
    load_scenario,
    parse_duration,
)

BUNDLED = ("burst", "closed-loop", "smoke", "steady")

MINIMAL = """
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "5s"
"""
_MIX = '[[request.mix]]\nname = "ll"\nweight = 1\nprompt_tokens = 8\n'
_SHARED = (
    "[request.shared_prefix]\nprefixes = {prefixes}\nprefix_tokens = {prefix_tokens}\n"
    "suffix_tokens = {suffix_tokens}\n"
)


def write(tmp_path: Path, text: str, name: str = "x.toml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


def error_of(path: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return str(info.value)


# --------------------------------------------------------------------------- bundled


def test_bundled_scenarios_all_load() -> None:
    names = [name for name, _ in list_bundled()]
    assert names == sorted(names)
    assert set(BUNDLED) <= set(names)
    for name, description in list_bundled():
        s = load_scenario(name)
        assert s.name == name
        assert description == s.description != ""
        assert s.source.endswith(f"{name}.toml")


def test_burst_is_the_original_k6_burst() -> None:
    s = load_scenario("burst")
    load = s.load
    assert load.executor == "ramping-arrival-rate"
    assert load.start_rate == 0
    assert [(st.duration_s, st.target) for st in load.stages] == [
        (30.0, 100.0),
        (5.0, 1000.0),
        (30.0, 100.0),
    ]
    assert load.duration_s == 65.0
    assert load.arrivals == "uniform"
    assert s.api == "anthropic"
    assert s.request.max_tokens == 256
    assert s.request.stream is True
    assert s.request.timeout_s == 60.0
    assert s.request.mix == (RequestClass("default", 1.0, 32, None),)
    assert s.slo


def test_smoke_is_small() -> None:
    s = load_scenario("smoke")
    assert s.load.executor == "constant-arrival-rate"
    assert s.load.stages[0].target * s.load.duration_s <= 200
    assert s.request.max_tokens <= 32


def test_closed_loop_has_k6_think_time() -> None:
    s = load_scenario("closed-loop")
    assert s.load.executor == "ramping-vus"
    assert s.load.think_time_s == 0.1
    assert s.load.start_vus == 0


def test_unknown_name_lists_bundled() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario("bursty")
    msg = str(info.value)
    assert msg.startswith('unknown scenario "bursty"; bundled scenarios: ')
    for name in BUNDLED:
        assert name in msg


def test_missing_path() -> None:
    with pytest.raises(ScenarioError, match=r"^nope/x\.toml: no such scenario file$"):
        load_scenario("nope/x.toml")


@pytest.mark.parametrize("path", ["/dev/zero", "/tmp"])
def test_a_path_that_is_no_file(path: str) -> None:
    """A device or a folder is named as such, not as missing (/dev/zero is never read)."""
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value) == f"{path}: not a regular file; give a scenario's .toml file"


def test_path_and_defaults(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, MINIMAL, "my-run.toml"))
    assert s.name == "my-run"  # the file's stem when no name is given
    assert s.description == ""
    assert s.api == "anthropic"
    assert s.load.stages == (Stage(5.0, 10.0, None),)
    assert isinstance(s.load, ArrivalRateLoad)
    assert s.load.executor == "constant-arrival-rate"
    assert s.load.start_rate == 10.0
    assert s.load.arrivals == "uniform"
    assert s.load.burstiness is None
    assert s.load.graceful_stop_s == 30.0
    assert s.request.max_tokens == 256
    assert s.request.stream is True
    assert s.request.timeout_s == 60.0
    assert s.request.cold_connections is False
    assert s.request.mix == (RequestClass("default", 1.0, 32, None),)
    assert s.slo == ()
    assert s.network is None


def test_constant_vus_normalised(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            """
            [load]
            executor = "constant-vus"
            vus = 8
            duration = "1m30s"
            think_time = "250ms"
            """,
        )
    )
    assert s.load.stages == (Stage(90.0, 8.0, None),)
    assert isinstance(s.load, VuLoad)
    assert s.load.start_vus == 8
    assert s.load.think_time_s == 0.25


def test_mix_and_network(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            """
            name = "mixed"
            api = "openai"
            [load]
            executor = "ramping-arrival-rate"
            stages = [{ duration = "10s", target = 5 }, { duration = "10s", target = 5 }]
            arrivals = "gamma"
            burstiness = 0.5
            [request]
            max_tokens = 64
            cold_connections = true
            [[request.mix]]
            name = "short"
            weight = 9
            prompt_tokens = 32
            [[request.mix]]
            name = "long"
            weight = 1
            prompt_tokens = 131072
            max_tokens = 16
            [slo]
            checks = ["latency:p99<1s"]
            [network]
            impairment = "packet-loss"
            loss = 0.1
            stages = [1]
            """,
        )
    )
    assert s.api == "openai"
    assert s.load.burstiness == 0.5
    assert s.request.mix == (
        RequestClass("short", 9.0, 32, None),
        RequestClass("long", 1.0, 131072, 16),
    )
    assert s.request.max_tokens_for(s.request.mix[0]) == 64
    assert s.request.max_tokens_for(s.request.mix[1]) == 16
    assert s.request.cold_connections is True
    assert s.slo == ("latency:p99<1s",)
    assert s.network is not None
    assert (s.network.impairment, s.network.loss, s.network.stages) == ("packet-loss", 0.1, (1,))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0),
     ("250us", 0.00025), ("1.5s", 1.5), ("0s", 0.0)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


# --------------------------------------------------------------------------- errors

LOAD_RAMP = (
    '[load]\nexecutor = "ramping-arrival-rate"\nstages = [{ duration = "1s", target = 1 }]\n'
)

ERRORS = [
    (
        '[load]\nexecutor = "rampin-arrival-rate"\n',
        'load.executor = "rampin-arrival-rate" is not one of constant-arrival-rate, '
        "ramping-arrival-rate, constant-vus, ramping-vus, trace, sessions",
    ),
    (
        "[load]\nrate = 1\n",
        "load.executor is missing (one of constant-arrival-rate, ramping-arrival-rate, "
        "constant-vus, ramping-vus, trace, sessions)",
    ),
    ('name = "x"\n', "the [load] table is missing"),
    (
        MINIMAL + "rtae = 5\n",
        'unknown key "load.rtae"; did you mean "load.rate"? (allowed in [load]: executor, '
        "arrivals, block_tokens, burstiness, duration, format, graceful_stop, rate, stages, "
        "start_rate, start_vus, think, think_time, time_scale, trace, turns, users, vus)",
    ),
    (
        'nmae = "x"\n' + MINIMAL,
        'unknown key "nmae"; did you mean "name"? (allowed in the top level: name, description, '
        "api, load, request, slo, validity, network, sweep, metrics, outcomes, stop)",
    ),
    (
        MINIMAL + "[request]\nmax_token = 5\n",
        'unknown key "request.max_token"; did you mean "request.max_tokens"? (allowed in '
        "[request]: max_tokens, stream, timeout, prompt_tokens, mix, cold_connections, dataset, "
        "shared_prefix, tools, tool_choice, thinking_budget)",
    ),
    (
        MINIMAL + 'think_time = "1s"\n',
        "load.think_time is not used by executor constant-arrival-rate (it takes rate, "
        "duration, arrivals, burstiness, graceful_stop)",
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 10\n',
        "load.duration is missing (executor constant-arrival-rate needs rate, duration)",
    ),
    (
        '[load]\nexecutor = "ramping-vus"\n',
        "load.stages is missing (executor ramping-vus needs stages)",
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 10\nduration = 30\n',
        'load.duration = 30 must be a string with a unit, e.g. "30s", "500ms", "2m" '
        "(a bare number could mean seconds or milliseconds)",
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 10\nduration = "30 sec"\n',
        'load.duration = "30 sec" is not a duration; use a number with a unit us, ms, s, m or '
        'h, e.g. "30s"',
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 10\nduration = "0s"\n',
        'load.duration = "0s" must be longer than 0s',
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = 0\nduration = "1s"\n',
        "load.rate = 0 must be > 0",
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = "fast"\nduration = "1s"\n',
        'load.rate = "fast" must be a number',
    ),
    (
        '[load]\nexecutor = "constant-arrival-rate"\nrate = true\nduration = "1s"\n',
        "load.rate = true must be a number",
    ),
    (
        LOAD_RAMP + "start_rate = -1\n",
        "load.start_rate = -1 must be >= 0",
    ),
    (
        '[load]\nexecutor = "ramping-arrival-rate"\nstages = [{ duration = "1s", target = -5 }]\n',
        "load.stages[0].target = -5 must be >= 0",
    ),
    (
        '[load]\nexecutor = "ramping-arrival-rate"\nstages = [{ duration = "1s" }]\n',
        "load.stages[0].target is missing",
    ),
    (
        '[load]\nexecutor = "ramping-arrival-rate"\n'
        'stages = [{ duration = "1s", target = 1, taget = 2 }]\n',
        'unknown key "load.stages[0].taget"; did you mean "load.stages[0].target"? (allowed '
        "in [load.stages[0]]: duration, target, name, mix)",
    ),
    (
        '[load]\nexecutor = "ramping-arrival-rate"\nstages = []\n',
        'load.stages = [] must be a non-empty list of { duration = "30s", target = N }',
    ),
    (
        '[load]\nexecutor = "ramping-arrival-rate"\nstages = [{ duration = "0s", target = 1 }]\n',
        "load.stages last 0s in total; the run needs time",
    ),
    (
        '[load]\nexecutor = "ramping-vus"\nstages = [{ duration = "1s", target = 1.5 }]\n',
        "load.stages[0].target = 1.5 must be a whole number",
    ),
    (
        '[load]\nexecutor = "constant-vus"\nvus = 0\nduration = "1s"\n',
        "load.vus = 0 must be >= 1",
    ),
    (
        LOAD_RAMP + 'arrivals = "bursty"\n',
        'load.arrivals = "bursty" is not one of uniform, poisson, gamma',
    ),
    (
        LOAD_RAMP + 'arrivals = "gamma"\n',
        'load.burstiness is missing (arrivals = "gamma" needs it: the gamma shape, 1 = '
        "Poisson, < 1 burstier)",
    ),
    (
        LOAD_RAMP + 'arrivals = "poisson"\nburstiness = 0.5\n',
        'load.burstiness = 0.5 applies only to arrivals = "gamma"',
    ),
    (
        LOAD_RAMP + 'arrivals = "gamma"\nburstiness = 0\n',
        "load.burstiness = 0 must be > 0",
    ),
    (
        'api = "grpc"\n' + MINIMAL,
        'api = "grpc" is not one of anthropic, openai',
    ),
    (
        MINIMAL + '[request]\ntimeout = "never"\n',
        'request.timeout = "never" is not a duration; use a number with a unit us, ms, s, m '
        'or h, e.g. "30s"',
    ),
    (
        MINIMAL + "[request]\nmax_tokens = 0\n",
        "request.max_tokens = 0 must be >= 1",
    ),
    (
        MINIMAL + '[request]\nstream = "yes"\n',
        'request.stream = "yes" must be true or false',
    ),
    (
        MINIMAL + "[request]\nprompt_tokens = 32\n[[request.mix]]\n"
        'name = "a"\nweight = 1\nprompt_tokens = 8\n',
        "request.prompt_tokens and [[request.mix]] are exclusive; give one prompt size or a mix",
    ),
    (
        MINIMAL + '[[request.mix]]\nname = "a"\nweight = 0\nprompt_tokens = 8\n',
        "request.mix[0].weight = 0 must be > 0",
    ),
    (
        MINIMAL + '[[request.mix]]\nname = "a"\nprompt_tokens = 8\n',
        "request.mix[0].weight is missing",
    ),
    (
        MINIMAL + '[[request.mix]]\nname = "a"\nweight = 1\nprompt_tokens = 8\n'
        '[[request.mix]]\nname = "a"\nweight = 1\nprompt_tokens = 9\n',
        'request.mix[1].name = "a" repeats an earlier class name; names must be unique',
    ),
    (
        MINIMAL + "[slo]\nchecks = [1]\n",
        'slo.checks = [1] must be a list of SLO strings such as "latency:p99<100ms"',
    ),
    (
        MINIMAL + '[network]\nimpairment = "latency"\nloss = 0.1\n',
        'network.impairment = "latency" is not one of packet-loss',
    ),
    (
        MINIMAL + '[network]\nimpairment = "packet-loss"\nloss = 1.5\n',
        "network.loss = 1.5 must be a fraction of packets, 0 < loss <= 1",
    ),
    (
        MINIMAL + '[network]\nimpairment = "packet-loss"\nloss = 0.1\nstages = [3]\n',
        "network.stages = [3] names stage 3, but load has stages 0..0",
    ),
    (
        MINIMAL + "[validity]\nmin_samples = 0\n",
        "validity.min_samples = 0 must be >= 1",
    ),
    (
        MINIMAL + "[validity]\nmax_schedule_lag = 10\n",
        'validity.max_schedule_lag = 10 must be a string with a unit, e.g. "30s", "500ms", "2m" '
        "(a bare number could mean seconds or milliseconds)",
    ),
    (
        MINIMAL + "[validity]\nmin_achieved_ratio = 97\n",
        "validity.min_achieved_ratio = 97 must be a fraction of the offered load, 0 < r <= 1",
    ),
    (
        MINIMAL + "[validity]\nmin_ratio_samples = 1\n",
        "validity.min_ratio_samples = 1 must be >= 2",
    ),
    (
        "load = 5\n",
        "load must be a table, got 5",
    ),
    (
        MINIMAL + "[outcomes]\nserver_queue = 5\n",
        'outcomes.server_queue = 5 must be a string with a unit, e.g. "30s", "500ms", "2m" '
        "(a bare number could mean seconds or milliseconds)",
    ),
    (
        MINIMAL + "[outcomes]\nat_rest_probes = 50\n",
        "outcomes.at_rest_probes = 50 must be at most 20 (probes per prompt size)",
    ),
    (
        MINIMAL + '[outcomes]\nserver_queue = "0ms"\n',
        'outcomes.server_queue = "0ms" must be longer than 0s',
    ),
    (
        MINIMAL + "[outcomes]\nretry_after_follow_ups = 500\n",
        "outcomes.retry_after_follow_ups = 500 must be at most 100 (refusals followed per run)",
    ),
    (
        MINIMAL + "[outcomes]\nretry_after_follow_ups = -1\n",
        "outcomes.retry_after_follow_ups = -1 must be >= 0",
    ),
    (
        MINIMAL + "[outcomes]\nretry_after_attempts = 0\n",
        "outcomes.retry_after_attempts = 0 must be >= 1",
    ),
    (
        MINIMAL + _MIX + 'headers = { "X-Stream-Mode" = 1 }\n',
        'request.mix[0].headers = {"X-Stream-Mode": 1} must be a table of strings, e.g. '
        '{ "X-Stream-Mode" = "low-latency" }',
    ),
    (
        MINIMAL + _MIX + 'headers = { "Bad Name" = "x" }\n',
        'request.mix[0].headers = {"Bad Name": "x"} holds \'Bad Name\': not an HTTP header '
        "name and ASCII value",
    ),
    (
        MINIMAL + _MIX + 'headers = { "X-Api-Key" = "sk-something" }\n',
        'request.mix[0].headers = {"X-Api-Key": "sk-something"} holds \'X-Api-Key\', a '
        "credential: pass keys with --api-key-env or --header, never in a scenario file",
    ),
    (
        MINIMAL + "[outcomes]\nretry_after_attempts = 11\n",
        "outcomes.retry_after_attempts = 11 must be at most 10 (tries per followed refusal)",
    ),
    # Every prefix is written out before the first request: 1e9 of them was memory unbounded.
    (
        MINIMAL + _SHARED.format(prefixes="1e9", prefix_tokens=512, suffix_tokens=32),
        "request.shared_prefix.prefixes = 1000000000.0 x prefix_tokens is more than 268,435,456 "
        "tokens of prefix text, which zqbench writes out before the first request; use fewer "
        "or shorter prefixes",
    ),
    (
        MINIMAL + _SHARED.format(prefixes=1, prefix_tokens=10_000_000, suffix_tokens=1),
        "request.shared_prefix.prefix_tokens = 10000000 + suffix_tokens is more than "
        "10,000,000 tokens, past any model's context (the largest, 10M); give a prompt the "
        "target's context holds",
    ),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_validation_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    assert error_of(path) == f"{path}: {message}"


def test_validity_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL + '[validity]\nmin_samples = 20\nmax_schedule_lag = "25ms"\n'
        "min_achieved_ratio = 0.9\nmin_ratio_samples = 30\n",
    )
    v = load_scenario(str(path)).validity
    assert (v.min_samples, v.max_schedule_lag_s, v.min_achieved_ratio, v.min_ratio_samples) == (
        20,
        0.025,
        0.9,
        30,
    )
    assert load_scenario(str(write(tmp_path, MINIMAL))).validity == ValidityConfig()


def test_a_class_carries_its_own_headers(tmp_path: Path) -> None:
    text = MINIMAL + _MIX + 'headers = { "X-Stream-Mode" = "low-latency" }\n'
    (cls,) = load_scenario(str(write(tmp_path, text))).request.mix
    assert cls.headers == (("X-Stream-Mode", "low-latency"),)
    (plain,) = load_scenario(str(write(tmp_path, MINIMAL + _MIX))).request.mix
    assert plain.headers == ()


def test_outcomes_table(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL + '[outcomes]\nserver_queue = "2ms"\nmargin = "50ms"\nat_rest_probes = 0\n',
    )
    o = load_scenario(str(path)).outcomes
    assert (o.server_queue_s, o.margin_s, o.at_rest_probes) == (0.002, 0.05, 0)
    assert (o.retry_after_follow_ups, o.retry_after_attempts) == (0, 3)  # off by default
    assert load_scenario(str(write(tmp_path, MINIMAL))).outcomes == OutcomesConfig()
    path = write(
        tmp_path, MINIMAL + "[outcomes]\nretry_after_follow_ups = 20\nretry_after_attempts = 5\n"
    )
    o = load_scenario(str(path)).outcomes
    assert (o.retry_after_follow_ups, o.retry_after_attempts) == (20, 5)


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "x"\n[load]\nexecutor = \n')
    msg = error_of(path)
    assert msg.startswith(f"{path}: line 3: invalid TOML: ")
    assert "line 3" in msg.split("invalid TOML: ", 1)[1]  # the parser's own message follows


def test_scenario_error_exits_2() -> None:
    assert ScenarioError("x").exit_code == 2


# --------------------------------------------------------------------------- scaling


def test_scaled_rates_and_durations() -> None:
    s = load_scenario("burst").scaled(rate_scale=0.1, duration_scale=0.5)
    assert [(st.duration_s, st.target) for st in s.load.stages] == [
        (15.0, pytest.approx(10.0)),
        (2.5, pytest.approx(100.0)),
        (15.0, pytest.approx(10.0)),
    ]
    assert s.load.duration_s == 32.5
    assert s.load.start_rate == 0.0
    assert s.load.graceful_stop_s == 30.0  # per-request behaviour is not scaled
    assert s.request.timeout_s == 60.0


def test_scaled_constant_and_vus() -> None:
    s = load_scenario("smoke").scaled(rate_scale=2.0, duration_scale=3.0)
    assert s.load.start_rate == 40.0 == s.load.stages[0].target
    assert s.load.duration_s == 15.0
    c = load_scenario("closed-loop").scaled(rate_scale=0.5)
    assert [st.target for st in c.load.stages] == [25.0, 25.0, 0.0]
    assert c.load.think_time_s == 0.1
    assert load_scenario("burst").scaled() == load_scenario("burst")


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_scaled_rejects_non_positive(bad: float) -> None:
    with pytest.raises(OptionError, match=r"^rate_scale .*: must be a number > 0$"):
        load_scenario("smoke").scaled(rate_scale=bad)
    with pytest.raises(OptionError, match=r"^duration_scale .*: must be a number > 0$"):
        load_scenario("smoke").scaled(duration_scale=bad)


def test_scaled_constant_vus_below_one(tmp_path: Path) -> None:
    path = write(tmp_path, '[load]\nexecutor = "constant-vus"\nvus = 2\nduration = "1s"\n')
    with pytest.raises(UsageError, match="< 1 virtual user"):
        load_scenario(path).scaled(rate_scale=0.1)


# --------------------------------------------------------------------------- overrides, dict


def test_overrides() -> None:
    s = load_scenario("burst").with_overrides(api="openai", max_tokens=8, stream=False)
    assert (s.api, s.request.max_tokens, s.request.stream) == ("openai", 8, False)
    g = s.with_overrides(arrivals="gamma", burstiness=0.25)
    assert (g.load.arrivals, g.load.burstiness) == ("gamma", 0.25)
    assert g.with_overrides(arrivals="poisson").load.burstiness is None
    with pytest.raises(OptionError, match=r"^api grpc: is not one of anthropic, openai$"):
        s.with_overrides(api="grpc")
    with pytest.raises(OptionError, match=r"^burstiness: must be > 0 with gamma arrivals$"):
        s.with_overrides(arrivals="gamma")
    with pytest.raises(OptionError, match=r"^arrivals: applies to arrival-rate executors"):
        load_scenario("closed-loop").with_overrides(arrivals="poisson")


@pytest.mark.parametrize("name", ["burst", "closed-loop", "trace", "sessions"])
def test_graceful_stop_override_applies_to_every_executor(name: str) -> None:
    s = load_scenario(name)
    assert s.load.graceful_stop_s == 30.0  # the k6 default, kept by every bundled scenario
    short = s.with_overrides(graceful_stop_s=2.5)
    assert short.load.graceful_stop_s == 2.5 and type(short.load) is type(s.load)
    assert short.load.stages == s.load.stages  # the schedule is untouched
    assert short.to_dict()["load"]["graceful_stop_s"] == 2.5  # what summary.json records
    assert s.with_overrides(graceful_stop_s=0).load.graceful_stop_s == 0


@pytest.mark.parametrize("bad", [-1.0, 86401.0, float("inf"), float("nan")])
def test_graceful_stop_override_out_of_range(bad: float) -> None:
    reason = r"^graceful_stop_s .* s: must be 0 to 86400 s, e\.g\. 5s$"
    with pytest.raises(OptionError, match=reason):
        load_scenario("burst").with_overrides(graceful_stop_s=bad)


def test_max_tokens_override_replaces_class_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        MINIMAL + '[[request.mix]]\nname = "a"\nweight = 1\nprompt_tokens = 8\nmax_tokens = 99\n',
    )
    s = load_scenario(path).with_overrides(max_tokens=4)
    assert s.request.max_tokens_for(s.request.mix[0]) == 4


def test_to_dict_is_json_ready() -> None:
    d = load_scenario("burst").to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["name"] == "burst"
    assert d["load"]["stages"][1] == {
        "duration_s": 5.0,
        "target": 1000.0,
        "name": "pulse",
        "mix": None,
    }
    assert d["request"]["mix"][0]["prompt_tokens"] == 32


# --------------------------------------------------------------------------- per-stage mix

STAGE_MIX = """
[load]
executor = "{executor}"
stages = [{{ duration = "5s", target = 4, mix = {mix} }}, {{ duration = "5s", target = 4 }}]

[[request.mix]]
name = "short"
weight = 0.4
prompt_tokens = 256

[[request.mix]]
name = "long"
weight = 0.1
prompt_tokens = 4096
"""


def test_stage_mix_is_kept_and_survives_scaling(tmp_path: Path) -> None:
    path = write(tmp_path, STAGE_MIX.format(executor="ramping-arrival-rate", mix='["short"]'))
    s = load_scenario(path)
    assert [st.mix for st in s.load.stages] == [("short",), None]
    scaled = s.scaled(rate_scale=2, duration_scale=0.5)
    assert scaled.load.stages[0] == Stage(2.5, 8.0, None, ("short",))
    assert s.to_dict()["load"]["stages"][0]["mix"] == ["short"]


@pytest.mark.parametrize(
    ("executor", "mix", "message"),
    [
        (
            "ramping-arrival-rate",
            '["tiny"]',
            'x.toml: load.stages[0].mix = ["tiny"] names class "tiny", but the request '
            "classes are short, long",
        ),
        (
            "ramping-arrival-rate",
            "[]",
            "x.toml: load.stages[0].mix = [] must be a non-empty list of request class names, "
            'e.g. ["short"]',
        ),
        (
            "ramping-arrival-rate",
            '["short", "short"]',
            'x.toml: load.stages[0].mix = ["short", "short"] names a class twice',
        ),
        (
            "ramping-vus",
            '["short"]',
            'x.toml: load.stages[0].mix = ["short"]: a per-stage mix applies to arrival-rate '
            "executors only",
        ),
    ],
)
def test_stage_mix_errors(tmp_path: Path, executor: str, mix: str, message: str) -> None:
    path = write(tmp_path, STAGE_MIX.format(executor=executor, mix=mix))
    assert error_of(path) == message.replace("x.toml", path, 1)


def test_summary_names_a_bundled_scenario_without_a_machine_path() -> None:
    """Reports are shared and committed: `bundled:NAME`, never this checkout's path."""
    from zqbench.scenario import load_scenario as load

    assert load("smoke").to_dict()["source"] == "bundled:smoke"
