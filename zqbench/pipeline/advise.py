"""`zqbench sweep --server-cmd`: which server setting to run, measured (an admission-cap
advisor: vLLM's `--max-num-queued-reqs`, say).

Too low a cap refuses work the server could start; too high lets a queue form. The advisor
launches the server command once per setting, runs the same scenario (same SLOs, seed and
requests) against each, and recommends the setting with the highest admitted throughput
whose SLOs hold:

    zqbench sweep burst --server-cmd 'vllm serve M --port {port} --max-num-seqs 4
        --max-num-queued-reqs {cap}' --server-param cap=2,4,16

- `--server-cmd` is split as a shell would (shlex), never run by one; then each word's
  `{NAME}` placeholders are filled (`{{` and `}}` are literal braces), so a value is always
  one word. `--server-param NAME=V1,V2,...` (repeatable) lists a placeholder's values;
  several params: every combination, the last one varying fastest. A placeholder without a
  param, or a param without a placeholder, is exit 2.
- `{port}` is zqbench's: with `--target`, that URL's port; without, a free loopback port
  picked for each setting, the target then http://127.0.0.1:PORT. A command with neither is
  exit 2 (zqbench would not know where it serves).
- Per setting (zqbench.target.launched): launched in a process group of its own (log:
  SETTING/server.log), ready when the target answers GET /health (or /v1/models) with a 2xx
  within `ready_timeout_s`; the run (`run_scenario`) into SETTING/; then stopped by its
  group's id (SIGTERM, SIGKILL) and its port seen free before the next launch; stopped too
  on an error or Ctrl-C. A setting whose server exits before it is ready, never becomes
  ready, or whose run cannot start is recorded as such (the log's last lines) and the sweep
  goes on: a setting the server rejects is a finding, not a reason to lose the others.
- The report (zqbench.outputs.advice_model.AdviceReport): each setting's admitted
  throughput, queued share, false refusals, TTFT p99, time_to_reject p99, refusal share and
  verdict, read from its summary; the recommendation and why (`recommend`).

Exit 0: a setting was recommended; 1: settings ran, none passed its SLOs; 3: no setting's
server came to serve (or no run started); 130: interrupted (the settings so far are
written).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import shlex
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from zqbench.errors import InterruptedRun, OptionError, TargetError, ZqbenchError
from zqbench.metrics.classify import REFUSED_NAMES
from zqbench.option_values import check_above
from zqbench.outputs.advice import figures, ms_text, rate, share
from zqbench.outputs.advice_model import AdviceReport, Recommendation, SettingResult
from zqbench.outputs.paths import existing_ancestor, make_out_dir, removed_if_empty_on_error
from zqbench.outputs.registry import write_advice
from zqbench.pipeline.options import RunOptions
from zqbench.pipeline.plan import prepare_scenario
from zqbench.pipeline.run import run_scenario
from zqbench.redact import REDACTED, is_sensitive, redact_text, redact_url
from zqbench.summary import StepSlo, Summary
from zqbench.target.embedded import free_port
from zqbench.target.launched import LaunchedServer, LaunchError, ServerNotReady, host_port

PORT = "port"  # the placeholder zqbench fills itself
MAX_SETTINGS = 100
READY_TIMEOUT_S = 300.0  # vLLM on CPU: 20-45 s; a large model on a GPU: minutes
SERVER_LOG = "server.log"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN = re.compile(r"[\w@%+=:,./{}-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")

SettingCallback = Callable[[SettingResult], None]


@dataclass(frozen=True, slots=True)
class AdviseOptions:
    """--server-cmd, --server-param and --ready-timeout, checked when built (OptionError)."""

    server_cmd: str
    server_params: tuple[str, ...] = ()
    ready_timeout_s: float = READY_TIMEOUT_S
    words: tuple[str, ...] = field(init=False)  # the command split, placeholders unfilled
    params: dict[str, tuple[str, ...]] = field(init=False)  # name -> values, as given

    def __post_init__(self) -> None:
        check_above("ready_timeout_s", self.ready_timeout_s, 0)
        words = split_command(self.server_cmd)
        params = parse_params(self.server_params)
        named = placeholders(words)
        for name in named:
            if name != PORT and name not in params:
                raise OptionError(
                    "server_cmd",
                    f"{{{name}}} has no --server-param: add --server-param {name}=V1,V2,... "
                    f"or take {{{name}}} out of the command",
                )
        for text, name in zip(self.server_params, params, strict=True):
            if name not in named:
                raise OptionError(
                    "server_params",
                    f"the command has no {{{name}}}: put {{{name}}} in --server-cmd, "
                    "or drop this --server-param",
                    value=text,
                )
        count = math.prod(len(values) for values in params.values())
        if count > MAX_SETTINGS:
            sizes = " x ".join(str(len(v)) for v in params.values())
            raise OptionError(
                "server_params",
                f"{count:,} settings ({sizes}); a sweep runs at most {MAX_SETTINGS}: "
                "list fewer values",
            )
        object.__setattr__(self, "words", tuple(words))
        object.__setattr__(self, "params", params)

    @property
    def uses_port(self) -> bool:
        return PORT in placeholders(self.words)

    def settings(self) -> list[Setting]:
        """Every combination of the params' values, the last param varying fastest."""
        names = list(self.params)
        combos = itertools.product(*(self.params[n] for n in names))
        return [Setting(i, dict(zip(names, c, strict=True))) for i, c in enumerate(combos)]


def split_command(text: str) -> list[str]:
    try:
        words = shlex.split(text)
    except ValueError as exc:  # No closing quotation, No escaped character
        raise OptionError(
            "server_cmd", f"cannot be split into words as a shell would: {exc}; close its quotes"
        ) from None
    if not words:
        raise OptionError(
            "server_cmd",
            "is empty: give the server's command line, e.g. 'vllm serve M --port {port}'",
        )
    return words


def placeholders(words: Sequence[str]) -> list[str]:
    """The `{NAME}`s of the words, in order of first appearance, each once."""
    found: list[str] = []
    for word in words:
        try:
            fields = list(string.Formatter().parse(word))
        except ValueError:  # a single { or }
            raise OptionError(
                "server_cmd",
                f"{word!r} has an unmatched brace: a placeholder is {{NAME}}, a literal brace "
                "is written {{ or }}",
            ) from None
        for _text, name, spec, conversion in fields:
            if name is None:
                continue
            if not _NAME.match(name) or spec or conversion:
                whole = (
                    name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
                )
                raise OptionError(
                    "server_cmd",
                    f"{{{whole}}} is not a placeholder: a placeholder is {{NAME}} (letters, "
                    "digits and _), and a literal brace is written {{ or }}",
                )
            if name not in found:
                found.append(name)
    return found


def parse_params(texts: Sequence[str]) -> dict[str, tuple[str, ...]]:
    params: dict[str, tuple[str, ...]] = {}
    for text in texts:
        name, eq, listed = text.partition("=")
        name = name.strip()
        if not eq:
            raise OptionError(
                "server_params", "is not NAME=V1,V2,...: e.g. --server-param cap=2,4,8", value=text
            )
        if not _NAME.match(name):
            raise OptionError(
                "server_params",
                "NAME must be letters, digits and _, not starting with a digit",
                value=text,
            )
        if name == PORT:
            raise OptionError(
                "server_params",
                "{port} is zqbench's to fill (--target's port, or a free loopback port): "
                "name this parameter otherwise",
                value=text,
            )
        if name in params:
            raise OptionError(
                "server_params",
                f"{name} is given twice: list all its values in one --server-param",
                value=text,
            )
        values = tuple(v.strip() for v in listed.split(","))
        if any(not v for v in values):
            raise OptionError(
                "server_params",
                "has an empty value: list the values separated by single commas",
                value=text,
            )
        for i, v in enumerate(values):
            if v in values[:i]:
                raise OptionError("server_params", f"{v} is listed twice", value=text)
        params[name] = values
    return params


@dataclass(frozen=True, slots=True)
class Setting:
    """One combination of the params' values."""

    index: int
    values: dict[str, str]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values.items()) or "as given"

    @property
    def folder(self) -> str:
        """Its folder's name: setting-00-cap-4 (any other character as _)."""
        slug = "_".join(f"{k}-{v}" for k, v in self.values.items())
        slug = _UNSAFE.sub("_", slug)[:60].strip("_")
        return f"setting-{self.index:02d}" + (f"-{slug}" if slug else "")

    def argv(self, words: Sequence[str], port: int) -> list[str]:
        filled = {**self.values, PORT: str(port)}
        return [word.format_map(filled) for word in words]


def _quoted(word: str) -> str:
    """A word as a shell would need it, placeholders left bare: `--port {port}`."""
    return word if _PLAIN.fullmatch(word) else shlex.quote(word)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line without its secrets: the value after a sensitive flag
    (`--api-key X`, `--api-key=X`) and key-looking words (zqbench.redact)."""
    shown: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            shown.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _value = word.partition("=")
        if flag.startswith("-") and is_sensitive(flag.lstrip("-")):
            if eq:
                shown.append(f"{flag}={REDACTED}")
                continue
            hide_next = True
        shown.append(redact_text(word))
    return shown


@dataclass(frozen=True, slots=True)
class AdviceResult:
    out_dir: Path
    report: AdviceReport
    exit_code: int  # 0: a setting recommended; 1: none passed


def run_advisor(
    options: RunOptions, advise: AdviseOptions, *, on_setting: SettingCallback | None = None
) -> AdviceResult:
    """Launch, run and stop each setting in turn; the report, written to the out folder.

    TargetError (exit 3) when no setting's server came to serve; InterruptedRun (130) on
    Ctrl-C, after the settings so far are written."""
    scenario, _ = prepare_scenario(options.plan, options.endpoint)  # bad input: before any launch
    given = options.endpoint.target
    if given is None and not advise.uses_port:
        raise OptionError(
            "server_cmd",
            "has no {port} and no --target is given: give --target URL (where the command "
            "serves), or put {port} in the command (a free loopback port per setting)",
        )
    plan = dataclasses.replace(options.plan, scenario=scenario, rate_scale=1.0, duration_scale=1.0)
    started = datetime.now(timezone.utc)
    out = options.output
    kept = existing_ancestor(Path(out.out) if out.out else out.reports_root)
    out_dir = make_out_dir(out.out, f"advise-{scenario.name}", now=started, root=out.reports_root)
    results: list[SettingResult] = []
    interrupted = False
    with removed_if_empty_on_error(out_dir, kept):
        try:
            for setting in advise.settings():
                result, interrupted = _run_setting(
                    dataclasses.replace(options, plan=plan), advise, setting, out_dir
                )
                results.append(result)
                if on_setting is not None:
                    on_setting(result)
                if interrupted:
                    break
        except KeyboardInterrupt:
            interrupted = True
        recommendation = None if interrupted else recommend(results)
        report = AdviceReport(
            scenario=scenario.name,
            command=" ".join(_quoted(w) for w in redact_argv(advise.words)),
            params={k: list(v) for k, v in advise.params.items()},
            target=redact_url(given) if given else "http://127.0.0.1:{port}",
            started_at=started.isoformat(timespec="seconds"),
            slos=[*scenario.slo, *options.plan.slos],
            ready_timeout_s=advise.ready_timeout_s,
            settings=results,
            recommendation=recommendation,
            outcome=outcome_line(results, recommendation, interrupted=interrupted),
        )
        write_advice(out_dir, report)
    if interrupted:
        raise InterruptedRun(f"interrupted; the settings so far are in {out_dir}")
    if not any(r.state == "ran" for r in results):
        raise TargetError(f"{report.outcome}; see {out_dir}")
    return AdviceResult(out_dir, report, 0 if recommendation else 1)


def _run_setting(
    options: RunOptions, advise: AdviseOptions, setting: Setting, out_dir: Path
) -> tuple[SettingResult, bool]:
    """Launch the setting's server, run the scenario against it, stop it: its record, and
    whether the run was interrupted."""
    given = options.endpoint.target
    port = host_port(given)[1] if given else free_port()
    base_url = given.rstrip("/") if given else f"http://127.0.0.1:{port}"
    folder = out_dir / setting.folder
    argv = setting.argv(advise.words, port)
    record = SettingRecord(setting, redact_argv(argv), redact_url(base_url), folder.name)
    server = LaunchedServer(
        argv,
        base_url,
        folder / SERVER_LOG,
        ready_timeout_s=advise.ready_timeout_s,
        insecure=options.endpoint.insecure,
    )
    try:
        with server:
            endpoint = dataclasses.replace(options.endpoint, target=base_url)
            output = dataclasses.replace(options.output, out=folder)
            run = run_scenario(dataclasses.replace(options, endpoint=endpoint, output=output))
    except LaunchError as exc:
        state = "not_ready" if isinstance(exc, ServerNotReady) else "exited"
        return record.failed(state, exc.message, exc.tail, server.ready_s), False
    except ZqbenchError as exc:  # it served, but the run could not start, or broke off
        return record.failed("failed", exc.message, [], server.ready_s), False
    return record.ran(run.summary, server.ready_s), run.interrupted


@dataclass(frozen=True, slots=True)
class SettingRecord:
    """What a setting's record holds before it ran."""

    setting: Setting
    command: list[str]
    target: str
    out_dir: str

    def _result(self, fields: dict[str, object], ready_s: float | None) -> SettingResult:
        return SettingResult.model_validate(
            {
                **fields,
                "index": self.setting.index,
                "values": self.setting.values,
                "label": self.setting.label,
                "command": self.command,
                "target": self.target,
                "out_dir": self.out_dir,
                "ready_s": ready_s,
            }
        )

    def failed(
        self, state: str, error: str, tail: list[str], ready_s: float | None
    ) -> SettingResult:
        unmeasured = dict.fromkeys(SettingResult.model_fields)  # no run: no figure (null)
        fields = {"state": state, "error": error, "log_tail": tail, "passed": False, "sent": 0}
        return self._result({**unmeasured, **fields, "slos": [], "validity_reasons": []}, ready_s)

    def ran(self, summary: Summary, ready_s: float | None) -> SettingResult:
        return self._result(measured(summary), ready_s)


def measured(summary: Summary) -> dict[str, object]:
    """A setting's figures from its run's summary."""
    sent = summary.requests.sent
    admitted = queued = refused = false = None
    if summary.outcomes is not None:
        c = summary.outcomes.counts
        queued = c.get("queued", 0)
        admitted = c.get("served", 0) + queued
        refused = sum(c.get(k, 0) for k in REFUSED_NAMES)  # those in disguise too
        fr = summary.outcomes.false_refusals
        false = getattr(fr, "count", None)
    duration = summary.duration if summary.duration > 0 else None
    return {
        "state": "ran",
        "error": None,
        "log_tail": [],
        "verdict": summary.verdict,
        "passed": summary.verdict == "pass",
        "sent": sent,
        "admitted": admitted,
        "queued": queued,
        "refused": refused,
        "false_refusals": false,
        "duration": duration,
        "admitted_per_s": None if admitted is None or duration is None else admitted / duration,
        "queued_share": queued / admitted if admitted and queued is not None else None,
        "refusal_share": refused / sent if refused is not None and sent else None,
        "ttft_p99": summary.metrics["ttft"].p99,
        "time_to_reject_p99": summary.metrics["time_to_reject"].p99,
        "slos": [StepSlo(expr=s.expr, verdict=s.verdict) for s in summary.slos],
        "validity_reasons": summary.validity.reasons,
    }


# ------------------------------------------------------------------ the recommendation
def recommend(settings: Sequence[SettingResult]) -> Recommendation | None:
    """The passing setting with the highest admitted throughput (the first of equals), and
    why: its figures, then what its neighbours (the settings just before and after it, in
    the order they ran) lost. A setting that refused work while a slot was free ranks below
    every one that did not: its cap sits under the server's capacity, so any throughput it
    showed over them is the noise of one short run (vLLM on one CPU core admits about as
    much with 2 slots as with 4). None: no setting passed."""
    passing = [s for s in settings if s.passed and s.admitted_per_s is not None]
    if not passing:
        return None
    best = max(passing, key=lambda s: (not s.false_refusals, s.admitted_per_s or 0.0))
    at = list(settings).index(best)
    neighbours = [settings[i] for i in (at - 1, at + 1) if 0 <= i < len(settings)]
    outranked = any((s.admitted_per_s or 0.0) > (best.admitted_per_s or 0.0) for s in passing)
    claim = "the highest admitted throughput whose SLOs hold" + (
        " without refusing while a slot was free" if outranked else ""
    )
    why = f"{claim}: {figures(best)}" + "".join(f"; {_lost(n, best)}" for n in neighbours)
    return Recommendation(setting=best.index, label=best.label, values=best.values, why=why + ".")


def _lost(s: SettingResult, best: SettingResult) -> str:
    """What a neighbour lost beside the recommended setting, from its figures."""
    if s.state != "ran":
        return f"{s.label} never ran ({_STATE_WORDS[s.state]})"
    parts = [f"{s.label} admitted {rate(s.admitted_per_s)}"]
    if s.false_refusals:
        parts.append(f"refused {s.false_refusals:,} requests while a slot was free")
    elif s.refused and (s.admitted_per_s or 0) < (best.admitted_per_s or 0):
        parts.append(f"refused {share(s.refusal_share)} of the requests")
    if s.queued:
        parts.append(f"let {share(s.queued_share)} of them queue (TTFT p99 {ms_text(s.ttft_p99)})")
    if not s.passed:
        parts.append(_why_not(s))
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)


_STATE_WORDS = {
    "exited": "its server exited before it was ready",
    "not_ready": "its server never became ready",
    "failed": "its run could not start",
    "ran": "it ran",
}


def _why_not(s: SettingResult) -> str:
    if s.verdict == "invalid":
        return "its run was invalid (" + "; ".join(s.validity_reasons[:1]) + ")"
    failed = [slo.expr for slo in s.slos if slo.verdict == "fail"]
    if failed:
        return f"failed {', '.join(failed)}"
    undecided = [slo.expr for slo in s.slos if slo.verdict == "inconclusive"]
    if undecided:
        return f"was inconclusive on {', '.join(undecided)}"
    return f"its verdict was {s.verdict}"


def outcome_line(
    settings: Sequence[SettingResult], rec: Recommendation | None, *, interrupted: bool = False
) -> str:
    """One line: the recommendation, or why there is none."""
    if interrupted:
        return f"interrupted after {len(settings)} setting(s): no recommendation"
    if rec is not None:
        return f"recommended: {rec.label}, {rec.why}"
    if not settings:
        return "no recommendation: no setting ran"
    if not any(s.state == "ran" for s in settings):
        return "no recommendation: no setting's server came to serve"
    told = ", ".join(
        f"{s.label}: {s.verdict}" if s.state == "ran" else f"{s.label}: {s.state}" for s in settings
    )
    hint = ""
    if any(s.verdict == "inconclusive" for s in settings):
        hint = "; an inconclusive verdict had too few requests to decide: raise --duration-scale"
    return f"no recommendation: no setting's SLOs hold ({told}){hint}"
