"""The target's unloaded TTFT, measured before the load: the baseline a request's outcome is
judged by when the server sends no timing headers (zqbench.metrics.classify).

Sequential streamed requests of a few output tokens (MAX_TOKENS), `per_size` at each prompt
size, each with a prompt of its own (a seed per probe, so no probe hits another's prefix
cache), on one keep-alive connection opened by a first request that is not fitted (it is
declared beside the probes, `opener`, so the set-up requests add up). Their
TTFTs are fitted as base + slope * prompt_tokens over each size's median (least squares; a
negative slope is read as 0), and the widest range among one size's probes is the
baseline's uncertainty.

A probe that fails, or the whole set past its deadline, makes the baseline unavailable with
the reason; the run goes on, and its requests without timing headers are undetermined.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zqbench.dialects import get_dialect
from zqbench.dialects.base import Dialect, DialectConfig, RequestSpec
from zqbench.errors import TargetError
from zqbench.redact import redact_url
from zqbench.sources.prompts import synth_prompt, synth_text
from zqbench.summary import AtRest, AtRestProbe, Unavailable
from zqbench.target.calibrate import Calibration
from zqbench.target.control import ControlClient

SEED = 8_888_000  # probe i uses SEED + i: its text shares no leading words with a run's
LONG_PROMPT_TOKENS = 2048  # a third size, so that prefill's cost per token is fitted
DEADLINE_S = 30.0
# Tokens asked of each probe. One is too few: a token that ends inside a UTF-8 character
# streams as no text (vLLM's Messages adapter then sends no delta at all), so a one-token
# probe can end with no token event. Only the first token's time is read.
MAX_TOKENS = 4


def probe_sizes(class_prompt_tokens: Sequence[int], max_context: int | None) -> tuple[int, ...]:
    """The shortest and longest class prompt and a long one, each fitting the context."""
    room = LONG_PROMPT_TOKENS if max_context is None else max(2, max_context // 2)
    sizes = {min(class_prompt_tokens), max(class_prompt_tokens), min(LONG_PROMPT_TOKENS, room)}
    return tuple(sorted({max(2, min(s, room)) for s in sizes}))


def _prompt(tokens: int, seed: int, calibration: Calibration | None) -> str:
    if calibration is None:
        return synth_prompt(tokens, seed)
    return synth_text(calibration.bytes_for(tokens), seed)


def fit(probes: Sequence[AtRestProbe], opener: AtRestProbe | None = None) -> AtRest:
    """The line through each size's median TTFT (a single size: slope 0); `opener`, the
    request that opened the connection, is kept beside it, never fitted."""
    by_size: dict[int, list[AtRestProbe]] = {}
    for p in probes:
        by_size.setdefault(p.size, []).append(p)
    groups = [by_size[s] for s in sorted(by_size)]
    x = np.array([float(np.median([p.prompt_tokens for p in g])) for g in groups])
    y = np.array([float(np.median([p.ttft for p in g])) for g in groups])
    # A line needs two prompt lengths the target counted apart (a server whose usage says
    # the same count for every prompt gives one).
    slope, base = (0.0, float(y.min())) if len(set(x.tolist())) < 2 else np.polyfit(x, y, 1)
    if slope < 0:
        slope, base = 0.0, float(y.min())
    spread = max(max(p.ttft for p in g) - min(p.ttft for p in g) for g in groups)
    return AtRest(
        probes=list(probes),
        base=max(0.0, float(base)),
        slope=float(slope),
        spread=float(spread),
        opener=opener,
    )


def _failure(transport: object, status: int, error: str | None) -> str | None:
    """Why a probe has no TTFT at rest: the transport's failure, a status, a broken body."""
    if transport is not None:
        return str(transport)
    if not 200 <= status < 300:
        return f"HTTP {status}"
    return error


def measure_at_rest(
    base_url: str,
    api: str,
    config: DialectConfig,
    sizes: Sequence[int],
    per_size: int,
    *,
    calibration: Calibration | None,
    optional_above: int | None = None,
    insecure: bool = False,
    http2: bool = False,
    timeout_s: float = 10.0,
    deadline_s: float = DEADLINE_S,
) -> AtRest | Unavailable:
    """`per_size` probes at each of `sizes` prompt tokens, fitted; or why there is none.

    A size above `optional_above` (the long prompt, past the scenario's own) that the target
    refuses with a 4xx (a context shorter than zqbench knew) is left out, not fatal: the fit
    then covers the scenario's own sizes."""
    if per_size <= 0:
        return Unavailable(unavailable="[outcomes] at_rest_probes = 0: no baseline was measured")
    prober = _Prober(base_url, get_dialect(api, config), calibration, timeout_s, deadline_s)
    probes: list[AtRestProbe] = []
    with ControlClient(insecure=insecure, http2=http2, timeout_s=timeout_s) as client:
        # The first request opens the connection (its TTFT is not at rest): not counted.
        opened = prober.once(client, sizes[0], SEED)
        if isinstance(opened, str):
            return Unavailable(unavailable=f"at-rest probe to {prober.url}: {opened}")
        for size in sizes:
            for _ in range(per_size):
                result = prober.once(client, size, SEED + 1 + len(probes))
                if isinstance(result, AtRestProbe):
                    probes.append(result)
                    continue
                if optional_above is not None and size > optional_above and "HTTP 4" in result:
                    break
                return Unavailable(unavailable=f"at-rest probe to {prober.url}: {result}")
    return fit(probes, opener=opened)


@dataclass
class _Prober:
    """One probe at a time, within each probe's timeout and the whole set's deadline."""

    base_url: str
    dialect: Dialect
    calibration: Calibration | None
    timeout_s: float
    deadline_s: float

    def __post_init__(self) -> None:
        self.url = redact_url(self.base_url)
        self.ends_at = time.monotonic() + self.deadline_s

    def once(self, client: ControlClient, tokens: int, seed: int) -> AtRestProbe | str:
        """The probe's TTFT, or why it has none."""
        left = self.ends_at - time.monotonic()
        if left <= 0:
            return f"not done within {self.deadline_s:g} s"
        spec = RequestSpec("at_rest", _prompt(tokens, seed, self.calibration), MAX_TOKENS)
        parser = self.dialect.parser(spec)
        try:
            ex = client.send(
                self.base_url, self.dialect.build(spec), parser, timeout_s=min(self.timeout_s, left)
            )
        except TargetError as exc:
            return exc.message
        summary = parser.summary
        failure = _failure(ex.error, summary.status, summary.error)
        if failure is not None:
            return failure
        if summary.t_first_token is None:
            return "no token was streamed"
        counted = summary.prompt_tokens if summary.prompt_tokens is not None else tokens
        ttft = (summary.t_first_token - ex.t_send) / 1e9
        return AtRestProbe(size=tokens, prompt_tokens=counted, ttft=ttft)
