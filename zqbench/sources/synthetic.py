"""Synthetic requests: the scenario's class mix, each class a prompt of a chosen length.

Every class's prompt is synthesised once per run (`prompts.synth_text`), sized to the
target by the calibration; each request then gets its class's prompt with its own id in
its first bytes, so no server can reuse a cached prefix across requests. Which class a
slot gets is drawn from the run's seed (`mix.py`): by request id for an arrival, from the
user's own stream for a virtual user's request.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from zqbench.dialects.base import RequestSpec, ResponseSummary
from zqbench.load import Slot
from zqbench.scenario import RequestClass, Scenario
from zqbench.sources.mix import SlotClasses
from zqbench.sources.prompts import synth_text, tagged

if TYPE_CHECKING:
    from zqbench.target.calibrate import Calibration


@dataclass(frozen=True, slots=True)
class ClassSpec:
    """One entry of the request mix, with its prompt already synthesised."""

    name: str
    prompt: str
    max_tokens: int
    prompt_tokens_estimate: int
    weight: float = 1.0
    headers: tuple[tuple[str, str], ...] = ()  # the class's own, besides the run's


@dataclass(frozen=True, slots=True)
class SyntheticSource:
    wire_name: ClassVar[str] = "synthetic"

    classes: tuple[ClassSpec, ...]
    stream: bool
    seed: int
    # Per load stage, the class names it draws from (None: all of them).
    stage_mixes: tuple[tuple[str, ...] | None, ...] = ()

    def open(self) -> SyntheticRequests:
        return SyntheticRequests(self)

    def prompt_bytes(self) -> dict[str, int]:
        return {c.name: len(c.prompt) for c in self.classes}

    def describe(self) -> dict[str, Any]:
        return {"source": self.wire_name}

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)  # msgpack sends its tuples as arrays

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> SyntheticSource:
        return cls(
            classes=tuple(
                ClassSpec(**{**c, "headers": tuple(tuple(h) for h in c.get("headers", ()))})
                for c in data["classes"]
            ),
            stream=data["stream"],
            seed=data["seed"],
            stage_mixes=tuple(None if m is None else tuple(m) for m in data["stage_mixes"]),
        )

    def mix(self) -> tuple[RequestClass, ...]:
        return tuple(
            RequestClass(c.name, c.weight, c.prompt_tokens_estimate, None) for c in self.classes
        )


def fit(scenario: Scenario, seed: int, calibration: Calibration | None) -> SyntheticSource:
    """The scenario's classes with their prompt text, sized by the calibration (else a byte
    a token)."""
    specs = []
    for i, cls in enumerate(scenario.request.mix):
        tokens = max(2, int(cls.prompt_tokens))  # at least one byte of text after BOS
        n_bytes = tokens - 1 if calibration is None else calibration.bytes_for(tokens)
        specs.append(
            ClassSpec(
                name=cls.name,
                prompt=synth_text(n_bytes, seed=seed * 1000 + i),
                max_tokens=scenario.request.max_tokens_for(cls),
                prompt_tokens_estimate=tokens,
                weight=cls.weight,
                headers=cls.headers,
            )
        )
    return SyntheticSource(
        classes=tuple(specs),
        stream=scenario.request.stream,
        seed=seed,
        stage_mixes=tuple(s.mix for s in scenario.load.stages),
    )


class SyntheticRequests:
    """One worker's draws: by request id for arrivals, a stream per virtual user."""

    def __init__(self, source: SyntheticSource) -> None:
        self.source = source
        self._classes = SlotClasses(source.mix(), source.seed, source.stage_mixes)

    def request(self, slot: Slot) -> RequestSpec:
        cls = self.source.classes[self._classes.of(slot)]
        return RequestSpec(
            request_class=cls.name,
            prompt=tagged(cls.prompt, f"{slot.request_id:010d} "),
            max_tokens=cls.max_tokens,
            stream=self.source.stream,
            prompt_tokens_estimate=cls.prompt_tokens_estimate,
            headers=cls.headers,
        )

    def answered(self, slot: Slot, request: RequestSpec, response: ResponseSummary) -> None:
        """Synthetic requests do not depend on earlier answers."""
