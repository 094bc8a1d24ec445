"""Prompt calibration: how many bytes of synthetic text make N tokens on this target.

zqbench downloads no tokenizer. Before a run it measures the target instead: a few probe
prompts of known byte lengths (`prompts.synth_text`, the same words every run uses) are
counted by the target, either by Anthropic's `POST /v1/messages/count_tokens` (tried
first on the anthropic API) or by a real request with max_tokens 1 whose `usage` gives
the prompt tokens. A least-squares line through the probes,

    tokens ≈ a · bytes + b        (b: BOS and the chat template around the prompt)

sizes each class's prompt: bytes = round((target - b) / a). The fit is cached per
(target URL, api, model) in a JSON file, `$ZQBENCH_CALIBRATION` if set, else
`$XDG_CACHE_HOME/zqbench/calibration.json` (default `~/.cache/...`), so later runs send no
probes. The tokens each request really had are recorded anyway (`prompt_tokens`,
`tokens_from_usage`).

Probes go through the control-plane client (`zqbench.target.control`): a handful of sequential
requests before the run, not measurements. Each is bounded by `timeout_s` and its answer by
`MAX_ANSWER_BYTES`; the whole calibration by `deadline_s`. A probe that times out ends the
calibration (a target that does not answer one probe will not answer the next), and so
does the deadline: the run then sizes its prompts at one byte per token.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zqbench.dialects import get_dialect
from zqbench.dialects.base import Dialect, DialectConfig, RequestSpec
from zqbench.errors import TargetError
from zqbench.redact import redact_url
from zqbench.sources.prompts import synth_text
from zqbench.target.control import ControlClient, ControlError

CACHE_ENV = "ZQBENCH_CALIBRATION"
# A token count or a one-token answer is a few hundred bytes; more is not an answer.
MAX_ANSWER_BYTES = 1024 * 1024
DEADLINE_S = 30.0  # the whole calibration, every probe included
PROBE_BYTES = (64, 256, 1024)  # fits any context of 1K+ tokens; cut to fit smaller ones
_PROBE_SEED = 7_777  # probe text differs from every run's prompts (seeds are small ints)


@dataclass(frozen=True, slots=True)
class Calibration:
    tokens_per_byte: float  # a
    base_tokens: float  # b: tokens of an empty prompt (BOS, template)
    source: str  # "count_tokens" | "usage"
    probes: tuple[tuple[int, int], ...]  # (bytes, tokens) measured

    def bytes_for(self, tokens: int) -> int:
        """Bytes of synthetic text that should make `tokens` prompt tokens (at least 1)."""
        return max(1, round((tokens - self.base_tokens) / self.tokens_per_byte))


MIN_TOKENS_PER_BYTE = 0.05
MAX_TOKENS_PER_BYTE = 4.0


def fit(probes: Sequence[tuple[int, int]], source: str) -> Calibration:
    """Least-squares line through (bytes, tokens); needs two distinct byte lengths."""
    x = np.array([p[0] for p in probes], dtype=np.float64)
    y = np.array([p[1] for p in probes], dtype=np.float64)
    if len(set(x.tolist())) < 2:
        raise ValueError("calibration needs probes of at least two byte lengths")
    a, b = np.polyfit(x, y, 1)
    # Real tokenizers give about 0.2-0.3 tokens per byte of English, byte-level ones 1.0.
    # A slope far outside that means the server's counts do not describe the prompt (a
    # fixed `usage`, a cache, a proxy): sizing prompts from it would be nonsense.
    if not MIN_TOKENS_PER_BYTE <= a <= MAX_TOKENS_PER_BYTE:
        raise TargetError(
            f"calibration: {a:.4g} tokens per byte is implausible (probes {list(probes)}): "
            "the server's token counts do not follow the prompt"
        )
    return Calibration(float(a), float(b), source, tuple((int(n), int(t)) for n, t in probes))


def cache_path() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "zqbench" / "calibration.json"


def cache_key(base_url: str, api: str, model: str) -> str:
    return f"{api} {redact_url(base_url)} {model}"


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: calibrate again
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, key: str, cal: Calibration) -> None:
    data = _read_cache(path)
    data[key] = asdict(cal)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(path)  # atomic: two runs never leave half a file


def cached(base_url: str, api: str, model: str) -> Calibration | None:
    entry = _read_cache(cache_path()).get(cache_key(base_url, api, model))
    if not isinstance(entry, dict):
        return None
    try:
        probes = tuple((int(n), int(t)) for n, t in entry["probes"])
        # Refit rather than trust the stored line: an entry written by an older zqbench
        # (or edited by hand) passes the same plausibility checks as a fresh one.
        return fit(probes, str(entry["source"]))
    except (KeyError, TypeError, ValueError, TargetError):
        return None


@dataclass
class _Prober:
    """Counts the tokens of one probe text on the target, through the control-plane client,
    each probe within `timeout_s` and all of them within `deadline_s`."""

    base_url: str
    dialect: Dialect
    client: ControlClient
    timeout_s: float
    deadline_s: float

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.ends_at = time.monotonic() + self.deadline_s

    def count_tokens(self, path: str, text: str) -> int:
        """The API's token-counting route: the same messages, no generation."""
        built = self.dialect.build(RequestSpec("calibration", text, 1, stream=False))
        body = json.loads(built.body)
        slim = {k: body[k] for k in ("model", "messages", "system") if k in body}
        self._arm()
        try:
            answer = self.client.post_json(
                self.base_url + path, json.dumps(slim).encode(), headers=built.headers
            )
        except ControlError as exc:
            if exc.error_class == "timeout":
                raise self._timed_out() from None
            raise
        return int(answer["input_tokens"])

    def usage_tokens(self, text: str) -> int:
        """A real request with max_tokens 1; its usage, as the dialect reads it, names the
        prompt tokens."""
        spec = RequestSpec("calibration", text, 1, stream=False)
        parser = self.dialect.parser(spec)
        self._arm()
        ex = self.client.send(self.base_url, self.dialect.build(spec), parser)
        where = f"calibration probe to {redact_url(self.base_url)}"
        if ex.error is not None:
            if ex.error.error_class == "timeout":
                raise self._timed_out()
            raise TargetError(f"{where}: {ex.error}")
        status = parser.summary.status
        if not 200 <= status < 300:
            raise TargetError(f"{where}: HTTP {status}")
        if parser.summary.prompt_tokens is None:
            raise TargetError("calibration: the target's answer has no prompt token count (usage)")
        return parser.summary.prompt_tokens

    def _arm(self) -> None:
        """The next call's deadline: its own, or what is left of the calibration's."""
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        self.client.timeout_s = min(self.timeout_s, left)

    def _timed_out(self) -> TargetError:
        url = redact_url(self.base_url)
        if time.monotonic() >= self.ends_at:
            return TargetError(f"calibration probes to {url}: no fit within {self.deadline_s:g} s")
        return TargetError(
            f"calibration probe to {url}: no complete answer within {self.timeout_s:g} s"
        )


def probe_sizes(max_context: int | None) -> tuple[int, ...]:
    """PROBE_BYTES, cut so a probe (about a token per byte at worst) fits the context."""
    if max_context is None:
        return PROBE_BYTES
    limit = max(16, max_context // 2)
    return tuple(sorted({min(n, limit) for n in PROBE_BYTES} | {min(16, limit // 2)}))


def _measure(prober: _Prober, texts: list[str]) -> Calibration:
    """The line through the probes, counted by the API's token-counting route if it has
    one and answers, else by the usage of real requests."""
    path = prober.dialect.count_tokens_path
    if path is not None:
        try:
            return fit([(len(t), prober.count_tokens(path, t)) for t in texts], "count_tokens")
        except (ControlError, ValueError, KeyError, TypeError):
            pass  # not offered (404), or another shape: count with usage instead
    return fit([(len(t), prober.usage_tokens(t)) for t in texts], "usage")


def calibrate(
    base_url: str,
    api: str,
    config: DialectConfig,
    *,
    max_context: int | None = None,
    timeout_s: float = 30.0,
    deadline_s: float = DEADLINE_S,
    insecure: bool = False,
    http2: bool = False,
    use_cache: bool = True,
) -> Calibration:
    """The target's bytes-to-tokens line, from the cache or from probe requests.

    TargetError when the probes fail, time out (`timeout_s` each, `deadline_s` in all) or
    answer past `MAX_ANSWER_BYTES`."""
    if use_cache:
        hit = cached(base_url, api, config.model)
        if hit is not None:
            return hit
    sizes = probe_sizes(max_context)
    texts = [synth_text(n, _PROBE_SEED + i) for i, n in enumerate(sizes)]
    dialect = get_dialect(api, config)
    with ControlClient(
        insecure=insecure, timeout_s=timeout_s, max_body_bytes=MAX_ANSWER_BYTES, http2=http2
    ) as client:
        prober = _Prober(base_url, dialect, client, timeout_s=timeout_s, deadline_s=deadline_s)
        cal = _measure(prober, texts)
    if use_cache:
        _write_cache(cache_path(), cache_key(base_url, api, config.model), cal)
    return cal
