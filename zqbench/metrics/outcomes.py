"""Each request's outcome over the run's frame, and the counts summary.json keeps.

The judgement is the outcome kernel's (zqbench.metrics.classify: the classes, the evidence
and their bounds); here it is given the whole run (its hold: the median over every
successful request), and each refusal is judged false or not (zqbench.metrics.
false_refusals). The per-request columns go into samples.parquet (`outcome`,
`outcome_evidence`, `outcome_measure_s`, `outcome_bound_s`), the counts into summary.json's
`outcomes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zqbench import summary as model
from zqbench.metrics import false_refusals
from zqbench.metrics.classify import (
    EVIDENCE,
    OUTCOMES,
    REFUSED_NAMES,
    Batch,
    Classes,
    classify,
)
from zqbench.metrics.false_refusals import Judged
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.migration import over_time
from zqbench.summary import json_number


@dataclass(frozen=True)
class Classified(Classes):
    """The kernel's classes of the frame's requests, with what the whole run adds."""

    hold_s: float | None
    refusals: Judged  # each refusal's occupancy and whether it was false

    def columns(self) -> dict[str, np.ndarray]:
        """The samples.parquet columns."""
        return {
            "outcome": self.names(),
            "outcome_evidence": np.array(EVIDENCE, dtype=object)[self.evidence],
            "outcome_measure_s": self.measure_s,
            "outcome_bound_s": self.bound_s,
            **self.refusals.columns(),
        }


def hold_s(frame: MetricFrame) -> float | None:
    """Median seconds a successful request streamed after its first token."""
    c = frame.columns
    hold = (c.t_end - c.t_first_token)[frame.ok]
    hold = hold[~np.isnan(hold)]
    return float(np.median(hold)) / NS_PER_S if len(hold) else None


def classify_frame(
    frame: MetricFrame,
    basis: model.OutcomeBasis,
    server_queue: model.ServerQueue | model.Unavailable | None = None,
) -> Classified:
    """Every request's outcome and the evidence that decided it (the kernel's); a refusal's
    falseness needs the target's capacity, which its running gauge may tell
    (`server_queue`, from its own metrics)."""
    c = frame.columns
    batch = Batch(
        answer=frame.answers,
        ttft_s=frame.values["ttft"] / NS_PER_S,
        server_queue_s=frame.values["server_queue"] / NS_PER_S,
        reject_s=(c.t_end - c.t_send) / NS_PER_S,
        prompt_tokens=frame.prompt_tokens,
    )
    hold = hold_s(frame)
    classes = classify(batch, basis, hold)
    refusals = false_refusals.judge(frame, classes.refused, basis, server_queue)
    return Classified(
        classes.outcome, classes.evidence, classes.measure_s, classes.bound_s, hold, refusals
    )


def _counts(codes: np.ndarray) -> dict[str, int]:
    hits = np.bincount(codes.astype(np.int64), minlength=len(OUTCOMES))
    return {name: int(hits[i]) for i, name in enumerate(OUTCOMES)}


def _shares(counts: dict[str, int]) -> tuple[float | None, float | None]:
    admitted = counts["served"] + counts["queued"]
    refusals = sum(counts[k] for k in REFUSED_NAMES)  # those in disguise too
    return (
        counts["queued"] / admitted if admitted else None,
        counts["refused_slow"] / refusals if refusals else None,
    )


def _stage(codes: np.ndarray) -> model.OutcomeStage:
    counts = _counts(codes)
    queued, slow = _shares(counts)
    return model.OutcomeStage(counts=counts, admitted_queued_share=queued, refusals_slow_share=slow)


def outcomes_summary(
    frame: MetricFrame, classified: Classified, basis: model.OutcomeBasis, duration_s: float
) -> model.Outcomes:
    counts = _counts(classified.outcome)
    queued, slow = _shares(counts)
    total = max(1, frame.n)
    evidence = np.bincount(classified.evidence.astype(np.int64), minlength=len(EVIDENCE))
    return model.Outcomes(
        basis=basis,
        hold=json_number(classified.hold_s),
        counts=counts,
        share={k: v / total for k, v in counts.items()},
        admitted_queued_share=queued,
        refusals_slow_share=slow,
        evidence={name: int(evidence[i]) for i, name in enumerate(EVIDENCE)},
        by_stage={str(s): _stage(classified.outcome[frame.stage == s]) for s in frame.stages},
        # Every outcome's counts per bin of send time (the status mix's bins).
        over_time=over_time(frame, duration_s, classified.names(), OUTCOMES),
        false_refusals=false_refusals.false_refusals_summary(
            frame, classified.refusals, classified.refused
        ),
    )
