"""Shared prefixes: `prefixes` groups of requests, each group's prompts starting with the same
`prefix_tokens` of text, then `suffix_tokens` of their own (`[request.shared_prefix]`).

A server with a prefix cache computes each group's prefix once and reuses it: the study
of that cache without a trace. Each group's prefix is synthesised once per run
(`prompts.synth_text`, from its own seed, so no two groups share a first token), sized
to the target by the calibration; each request's suffix starts with its own id, so no two
requests share more than their group's prefix.

A request's group is drawn from the run's seed, like a request class (`mix.py`): by request
id for an arrival, from the user's own stream for a virtual user's request, each group
equally likely.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot
from zqbench.load.executor import WireFields
from zqbench.scenario import RequestClass, Scenario
from zqbench.sources.mix import SlotClasses
from zqbench.sources.prompts import synth_text, tagged

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration

_SEED_BASE = 7_000_000  # prefix seeds apart from the synthetic classes' (seed * 1000 + i)


def _suffix_seed(seed: int) -> int:
    """The suffix text's seed, apart from every prefix's: below _SEED_BASE for the run seeds
    that fit (the texts runs have always sent), above every prefix's past them (7,000,000 and
    up once gave a negative seed, exit 5)."""
    return _SEED_BASE - 1 - seed if seed < _SEED_BASE else _SEED_BASE + seed * 1000 + 999_999_999


@dataclass(frozen=True, slots=True)
class SharedPrefixSource(WireFields):
    wire_name: ClassVar[str] = "shared-prefix"

    prefixes: tuple[str, ...]  # each group's prefix text
    suffix: str  # the text every suffix is cut from (its first bytes become the request id)
    prefix_tokens: int
    suffix_tokens: int
    request_class: str
    max_tokens: int
    stream: bool
    seed: int

    def open(self) -> SharedPrefixRequests:
        return SharedPrefixRequests(self)

    def prompt_bytes(self) -> dict[str, int]:
        return {self.request_class: len(self.prefixes[0]) + len(self.suffix)}

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.wire_name,
            "prefixes": len(self.prefixes),
            "prefix_tokens": self.prefix_tokens,
            "suffix_tokens": self.suffix_tokens,
            "prefix_bytes": len(self.prefixes[0]),
            "suffix_bytes": len(self.suffix),
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SharedPrefixSource:
        fields = {k: data[k] for k in cls.__slots__}
        return cls(**{**fields, "prefixes": tuple(data["prefixes"])})

    def groups(self) -> tuple[RequestClass, ...]:
        """The groups as equally weighted classes, for the seeded draws of `mix.py`."""
        tokens = self.prefix_tokens + self.suffix_tokens
        return tuple(RequestClass(str(k), 1.0, tokens, None) for k in range(len(self.prefixes)))


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> SharedPrefixSource:
    """The groups' prefixes and the suffix text, sized by the calibration (else a byte a
    token, the one token of BOS or template counted in the prefix)."""
    config = scenario.request.shared_prefix
    assert config is not None
    total, prefix = config.prefix_tokens + config.suffix_tokens, config.prefix_tokens
    if calibration is None:
        prefix_bytes, total_bytes = max(1, prefix - 1), max(2, total - 1)
    else:
        prefix_bytes, total_bytes = calibration.bytes_for(prefix), calibration.bytes_for(total)
    suffix_bytes = max(1, total_bytes - prefix_bytes)
    return SharedPrefixSource(
        prefixes=tuple(
            synth_text(prefix_bytes, seed=_SEED_BASE + seed * 1000 + k)
            for k in range(config.prefixes)
        ),
        suffix=synth_text(suffix_bytes, seed=_suffix_seed(seed)),
        prefix_tokens=prefix,
        suffix_tokens=config.suffix_tokens,
        request_class=scenario.request.mix[0].name,
        max_tokens=scenario.request.max_tokens,
        stream=scenario.request.stream,
        seed=seed,
    )


class SharedPrefixRequests:
    """One worker's draws of a group: by request id for arrivals, a stream per user."""

    def __init__(self, source: SharedPrefixSource) -> None:
        self.source = source
        self._groups = SlotClasses(source.groups(), source.seed)

    def request(self, slot: Slot) -> RequestSpec:
        s = self.source
        group = self._groups.of(slot)
        return RequestSpec(
            request_class=s.request_class,
            prompt=s.prefixes[group] + tagged(s.suffix, f" {slot.request_id:010d} "),
            max_tokens=s.max_tokens,
            stream=s.stream,
            prompt_tokens_estimate=s.prefix_tokens + s.suffix_tokens,
            source_row=group,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        """Shared-prefix requests do not depend on earlier answers."""
