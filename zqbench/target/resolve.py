"""The target resolver: which model to ask a `--target` for, and which API it speaks.

`zqbench run`, `sweep`, `probe` and `conform` resolve a target here, with one rule, before
any load reaches it:

1. Model: the one asked for, else GET /v1/models (both APIs serve it; sent with the auth
   headers of both). One model listed: that one. Several: the first, said in a note, or a
   UsageError when `strict_model`. None, no such route, or an answer that is not a model
   list: UsageError naming `--model`.
2. API: the ones asked for, else detected. Each is checked by one request, built by its
   dialect (`zqbench.dialects`: the real headers and body), one token, not streamed,
   within a short timeout. Detected: every API that answers well is kept, the preferred
   one (the scenario's) first.
3. The same requests check the model: a refusal is a UsageError in the server's own words
   (`model 'wrong' refused by the target: 404 The model `wrong` does not exist.`), before
   any load. A target that answers no better than "unsure" is not refused: a run measures
   what a misbehaving server does, so it goes on, with a warning.

How one check request ended (`_Probe.outcome`):

    ok       a well-formed answer of that API
    absent   a 404 or 405 without the server's words: not this API's route there (vLLM's
             FastAPI answers `{"detail": "Not Found"}`)
    refused  another 4xx but 408 and 429, or a 404/405 in the API's error shape: the API
             is there, and says no to this request (the model, the key)
    unsure   anything else: no answer (connect, timeout, reset), 408, 429, 5xx, a 2xx
             that is not that API's answer. A named API is used anyway; detecting, the
             first unsure one (the preferred) is, when no API answered well or refused.

The result, `Resolution`, carries `record` (a `zqbench.summary.TargetResolution`, as
summary.json and the reports state it) and the notes a caller shows the user.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zqbench.dialects import DIALECTS, get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec
from zqbench.dialects.common import ERROR_BODY_CAP, error_message
from zqbench.errors import TargetError, UsageError
from zqbench.printable import shown
from zqbench.redact import redact_text, redact_url
from zqbench.summary import ApiProbe, ApiSource, TargetResolution
from zqbench.target.control import Answer, ControlClient
from zqbench.transport.base import HttpRequest

MODELS_PATH = "/v1/models"
TIMEOUT_S = 5.0  # per request: one token; a slower answer only makes the check unsure
SHOWN_MODELS = 8  # model ids named in a message
MAX_WORDS = 500  # characters of a server's error message in one
KEY_FIX = "name the variable holding the key with --api-key-env"
_CHECK = RequestSpec("resolve", "Say OK.", max_tokens=1, stream=False)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the user asked for: a model and APIs, or nothing (discover, detect)."""

    model: str | None = None  # None: discover it with GET /v1/models
    apis: tuple[str, ...] = ()  # each must answer; (): detect among every API
    prefer: str | None = None  # the scenario's api: first when detecting, kept when both work
    strict_model: bool = False  # several models listed: fail rather than take the first


@dataclass(frozen=True, slots=True)
class Access:
    """How to reach the target: its base URL and what every request carries."""

    base_url: str
    api_key: str | None = None  # never logged (the dialects wrap it in Secret)
    extra_headers: tuple[tuple[str, str], ...] = ()
    insecure: bool = False
    timeout_s: float = TIMEOUT_S
    http2: bool = False  # HTTP/2 (prior knowledge on http://), as the load will speak


@dataclass(frozen=True, slots=True)
class Resolution:
    model: str
    api: str  # the API the run speaks
    apis: tuple[str, ...]  # every API that answered well, `api` first
    record: TargetResolution  # as summary.json and the reports state it
    model_note: str = ""  # several models were listed: which one is used
    api_note: str = ""  # both APIs answer: which one is used, and why
    warnings: tuple[str, ...] = ()  # an API used although its check was unsure

    @property
    def notes(self) -> tuple[str, ...]:
        """Every line for the user, warnings marked as such."""
        lines = (self.model_note, self.api_note, *(f"warning: {w}" for w in self.warnings))
        return tuple(line for line in lines if line)


@dataclass(frozen=True, slots=True)
class _Probe:
    api: str
    path: str
    status: int  # 0: no HTTP answer
    ms: float
    outcome: str  # ok | absent | refused | unsure
    words: str | None  # the server's message, or the transport's failure
    answered_model: str | None = None  # the model its answer named, when it named one

    @property
    def said(self) -> str:
        """The answer in a few words: `404 The model ... does not exist.`, `HTTP 503`."""
        if not self.status:
            return self.words or "no answer"
        return f"{self.status} {self.words}" if self.words else f"HTTP {self.status}"

    def record(self) -> ApiProbe:
        error = None if self.outcome == "ok" else (self.words or f"HTTP {self.status}")
        return ApiProbe(api=self.api, path=self.path, status=self.status, ms=self.ms, error=error)


# A model list is parsed whole: 1,400 models already pass 64 KiB (ERROR_BODY_CAP).
MODEL_LIST_CAP = 8 * 1024 * 1024


class _Answer(Answer):
    """The answer kept (the first bytes of the body: an error's words), read as JSON."""

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(bytes(self.body))

    def words(self) -> str | None:
        """The server's error message, escaped and cut: it goes into messages for people."""
        try:
            said = error_message(self.json())
        except (ValueError, RecursionError):
            return None
        return None if said is None else shown(said, MAX_WORDS)


def resolve_target(access: Access, wanted: Wanted) -> Resolution:
    """The model and API to use at `access.base_url`, checked by one request per API."""
    config = DialectConfig(model="", api_key=access.api_key, extra_headers=access.extra_headers)
    with ControlClient(
        insecure=access.insecure, timeout_s=access.timeout_s, http2=access.http2
    ) as client:
        models = _models(client, access, config, required=wanted.model is None)
        model, model_note = _pick_model(wanted, models)
        config = dataclasses.replace(config, model=model)
        probes = [_check(client, access.base_url, api, config) for api in _candidates(wanted)]
    usable = _usable(probes, wanted, model, models)
    warnings = _check_named_model(wanted, model, models, usable)
    apis = tuple(p.api for p in usable)
    api_source, api_note = _api_choice(wanted, usable)
    record = TargetResolution(
        model=model,
        model_source="option" if wanted.model else "discovered",
        api=apis[0],
        api_source=api_source,
        models=list(models),
        probes=[p.record() for p in probes],
    )
    warnings += tuple(
        f"api {p.api} not confirmed: POST {p.path}: {p.said}; going on"
        for p in usable
        if p.outcome == "unsure"
    )
    return Resolution(model, apis[0], apis, record, model_note, api_note, warnings)


_ANSWERED_MODEL = re.compile(rb'"model"\s*:\s*"([^"\\]{1,256})"')


def _check_named_model(
    wanted: Wanted, model: str, models: tuple[str, ...], usable: list[_Probe]
) -> tuple[str, ...]:
    """A --model the target does not list. When its answer named a model it lists, it
    served that one, whatever was asked (llama.cpp's server does): the run would measure
    another model than the one named, so it stops. Unlisted but answered as asked (an
    alias, a listing that omits it): a warning."""
    if not wanted.model or not models or model in models:
        return ()
    answered = {p.answered_model for p in usable if p.outcome == "ok"} - {None}
    served = sorted(a for a in answered if a in models and a != model)
    if served:
        raise UsageError(
            f"model '{shown(model)}' is not served by the target: GET {MODELS_PATH} lists "
            f"{_named(models)} and it answered as '{shown(served[0])}'; name a listed model "
            "with --model, or drop --model"
        )
    return (
        f"model {shown(model)} is not among the models GET {MODELS_PATH} lists ({_named(models)})",
    )


def _candidates(wanted: Wanted) -> tuple[str, ...]:
    if wanted.apis:
        return wanted.apis
    first = (wanted.prefer,) if wanted.prefer in DIALECTS else ()
    return (*first, *(api for api in DIALECTS if api not in first))


def _usable(
    probes: list[_Probe], wanted: Wanted, model: str, models: tuple[str, ...]
) -> list[_Probe]:
    """The probes of the APIs to use, the first the run's; the error when there is none
    (named: when any was refused or is absent)."""
    if wanted.apis:
        for probe in probes:
            if probe.outcome in ("refused", "absent"):
                raise _failure(probe, model, models, probes, detecting=False)
        return probes
    ok = [p for p in probes if p.outcome == "ok"]
    refused = [p for p in probes if p.outcome == "refused"]
    unsure = [p for p in probes if p.outcome == "unsure"]
    if ok:
        return ok
    if refused:
        # A refusal that names the model says more than one about a route (`no route ...`).
        refused.sort(key=lambda p: model not in (p.words or ""))
        raise _failure(refused[0], model, models, probes, detecting=True)
    if unsure:
        return unsure[:1]
    raise _failure(probes[0], model, models, probes, detecting=True)


def _api_choice(wanted: Wanted, usable: list[_Probe]) -> tuple[ApiSource, str]:
    """Where the API came from, and a note when the target answers more than one."""
    first = usable[0]
    if wanted.apis:
        return "option", ""
    if len(usable) < 2:
        kept = first.outcome == "unsure" and first.api == wanted.prefer
        return ("scenario" if kept else "detected"), ""
    both = " and ".join(p.api for p in usable)
    if first.api == wanted.prefer:
        return "scenario", f"api {first.api}: the target answers {both}; the scenario's is used"
    return "detected", f"api {first.api}: the target answers {both}; the first is used"


# ---------------------------------------------------------------- the model
def _models(
    client: ControlClient, access: Access, config: DialectConfig, *, required: bool
) -> tuple[str, ...]:
    """The ids GET /v1/models lists. With a model already named, a listing that fails is
    no error (some gateways have none): it only helps explain a refusal."""
    try:
        return _list_models(client, access, config)
    except (UsageError, TargetError):
        if required:
            raise
        return ()


def _list_models(client: ControlClient, access: Access, config: DialectConfig) -> tuple[str, ...]:
    answer = _Answer(keep=MODEL_LIST_CAP)
    request = HttpRequest("GET", MODELS_PATH, _listing_headers(config))
    ex = client.send(access.base_url, request, answer)
    where = f"GET {MODELS_PATH}"
    if ex.error is not None:
        raise TargetError(f"{where} at {redact_url(access.base_url)}: {ex.error}")
    if answer.status == 404:
        raise UsageError(f"target has no {where} (404); name the model with --model")
    if not 200 <= answer.status < 300:
        said = answer.words()
        status = f"{answer.status} {said}" if said else str(answer.status)
        fix = KEY_FIX if answer.status in (401, 403) else "name the model with --model"
        raise UsageError(f"target's {where} answered {status}; {fix}")
    try:
        page = answer.json()
    except (ValueError, RecursionError):
        raise UsageError(f"target's {where} is not JSON; name the model with --model") from None
    data = page.get("data") if isinstance(page, dict) else None
    if not isinstance(data, list):
        raise UsageError(f"target's {where} holds no model list; name the model with --model")
    ids = (m.get("id") for m in data if isinstance(m, dict))
    return tuple(dict.fromkeys(i for i in ids if isinstance(i, str) and i))


def _listing_headers(config: DialectConfig) -> tuple[tuple[str, str], ...]:
    """Both APIs' headers (their keys, anthropic-version, the user's), without a body's."""
    headers: dict[str, tuple[str, str]] = {}
    for api in DIALECTS:
        for name, value in get_dialect(api, config).headers:
            if name.lower() != "content-type":
                headers.setdefault(name.lower(), (name, value))
    return tuple(headers.values())


def _pick_model(wanted: Wanted, models: tuple[str, ...]) -> tuple[str, str]:
    """The model, and a note when it is the first of several listed."""
    if wanted.model:
        return wanted.model, ""
    where = f"GET {MODELS_PATH}"
    if not models:
        raise UsageError(f"target lists no models at {where}; name one with --model")
    if len(models) == 1:
        return models[0], ""
    if wanted.strict_model:
        raise UsageError(
            f"target lists {len(models)} models at {where} ({_named(models)}); "
            "name one with --model"
        )
    note = (
        f"model {shown(models[0])}: the first of the {len(models)} models {where} lists "
        f"({_named(models)}); name another with --model"
    )
    return models[0], note


def _named(models: Sequence[str]) -> str:
    named = ", ".join(shown(m) for m in models[:SHOWN_MODELS])
    return named + (", ..." if len(models) > SHOWN_MODELS else "")


# ---------------------------------------------------------------- the API
def _check(client: ControlClient, base_url: str, api: str, config: DialectConfig) -> _Probe:
    """One one-token request of `api` for the model; how it ended."""
    dialect = get_dialect(api, config)
    parser = dialect.parser(_CHECK)
    answer = _Answer(parser, keep=ERROR_BODY_CAP)
    ex = client.send(base_url, dialect.build(_CHECK), answer)
    ms = round((ex.t_end - ex.t_send) / 1e6, 1) if ex.t_send else 0.0
    status = answer.status
    if ex.error is not None:
        return _Probe(api, dialect.path, 0, ms, "unsure", redact_text(str(ex.error)))
    words = answer.words()
    problem = parser.summary.error  # None: a well-formed answer of this API
    if 200 <= status < 300 and problem is None:
        found = _ANSWERED_MODEL.search(bytes(answer.body))
        named = found.group(1).decode("utf-8", "replace") if found else None
        return _Probe(api, dialect.path, status, ms, "ok", words, named)
    if 200 <= status < 300:
        outcome, words = "unsure", words or f"not {api}'s answer ({problem})"
    elif status in (404, 405) and words is None:
        outcome = "absent"
    elif 400 <= status < 500 and status not in (408, 429):
        outcome = "refused"
    else:
        outcome = "unsure"
    return _Probe(api, dialect.path, status, ms, outcome, words)


def _failure(
    probe: _Probe, model: str, models: tuple[str, ...], probes: list[_Probe], *, detecting: bool
) -> UsageError:
    """Why `probe` (refused, or absent) stops the run, in the server's words if it said."""
    if probe.outcome == "refused":
        return _refusal(probe, model, models)
    if detecting:
        routes = ", ".join(f"POST {p.path}: {p.status}" for p in probes)
        return UsageError(
            f"target serves neither API ({routes}); check --target (a base URL has no /v1)"
        )
    return UsageError(
        f"api {probe.api}: the target does not serve it (POST {probe.path}: {probe.status}); "
        "name another with --api, or detect it with --api auto"
    )


def _refusal(probe: _Probe, model: str, models: tuple[str, ...]) -> UsageError:
    if probe.status in (401, 403):
        return UsageError(f"{probe.api} request refused by the target: {probe.said}; {KEY_FIX}")
    listed = models and model not in models
    serves = f" (GET {MODELS_PATH} lists: {_named(models)})" if listed else ""
    return UsageError(f"model '{shown(model)}' refused by the target: {probe.said}{serves}")
