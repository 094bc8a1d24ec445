"""summary.json's `outcomes` as report.html, summary.md and the terminal show them: one row
per stage and a total, each outcome's count, the queued share of admitted requests and the
slow share of refusals, then what decided them and the bounds they were judged by, and what
a refusal in disguise (refused_in_stream) is, when the run had one.

    outcomes_view(summary.outcomes, stage_label, figure)  # OutcomesView, or None
    outcome_line(summary.outcomes)                       # the terminal's line, or []
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zqbench import summary as model
from zqbench.metrics.classify import IN_DISGUISE
from zqbench.metrics.outcomes import outcomes_summary
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import Figure, ms_text, or_none, stage_label

if TYPE_CHECKING:
    from zqbench.metrics.frame import MetricFrame
    from zqbench.metrics.summarize import RunInfo

ALWAYS_SHOWN = ("served", "queued", "refused_fast", "refused_slow")
FIRST_TIMES = 5  # false refusals' times shown in the sentence


@dataclass(frozen=True)
class OutcomesView:
    columns: tuple[str, ...]  # the outcomes shown: ALWAYS_SHOWN, the others when seen
    rows: tuple[tuple[str, model.OutcomeStage], ...]  # each stage's label and counts, then "all"
    evidence: str  # "decided by server_queue 80, time_to_reject 20"
    basis: str  # the bounds, the hold and the at-rest baseline
    over_time: bool  # summary.json has counts per time bin (the `outcomes` plot draws them)
    figure: Figure | None = None  # the `outcomes` plot, when drawn
    false_refusals: str | None = None  # one sentence; None: a run saved before them
    # what refused_in_stream means, when some request had it; None otherwise
    in_disguise: str | None = None


_share = or_none(".1%")


def basis_text(o: model.Outcomes) -> str:
    """The bounds the outcomes were judged by, in one sentence."""
    rules, at_rest = o.basis.rules, o.basis.at_rest
    parts = [
        f"queued past server_queue {ms_text(rules.server_queue)} (timing headers)",
        f"else past 2x TTFT at rest + max(margin {ms_text(rules.margin)},"
        f" hold {ms_text(o.hold)} / 2)",
    ]
    if isinstance(at_rest, model.AtRest):
        parts.append(
            f"TTFT at rest {ms_text(at_rest.base)} + {ms_text(at_rest.slope * 1000)} per 1k prompt "
            f"tokens (spread {ms_text(at_rest.spread)}, {len(at_rest.probes)} probes)"
        )
    else:
        parts.append(f"no TTFT at rest: {at_rest.unavailable}")
    return "; ".join(parts)


def outcomes_view(
    o: model.Outcomes | None, stage_label: Callable[[str], str], figure: Figure | None = None
) -> OutcomesView | None:
    """The section, or None for a run that judged no outcomes (saved before them)."""
    if o is None:
        return None
    columns = tuple(c for c in o.counts if c in ALWAYS_SHOWN or o.counts[c])
    rows = [(stage_label(k), v) for k, v in o.by_stage.items()]
    total = model.OutcomeStage(
        counts=o.counts,
        admitted_queued_share=o.admitted_queued_share,
        refusals_slow_share=o.refusals_slow_share,
    )
    rows.append(("all", total))
    evidence = ", ".join(f"{k} {v:,}" for k, v in o.evidence.items() if v)
    return OutcomesView(
        columns=columns,
        rows=tuple(rows),
        evidence=f"decided by {evidence or 'nothing'}",
        basis=basis_text(o),
        over_time=isinstance(o.over_time, model.OverTime),
        figure=figure,
        false_refusals=false_refusals_text(o.false_refusals, stage_label),
        in_disguise=in_disguise_text(o.counts),
    )


def in_disguise_text(counts: dict[str, int]) -> str | None:
    """One sentence on the refusals in disguise, or None when there were none."""
    n = counts.get("refused_in_stream", 0)
    if not n:
        return None
    return (
        f"refused_in_stream {n:,}: each {IN_DISGUISE} (the status mix's `<status>:"
        "refused_in_stream`), counted as a refusal, not as served or failed"
    )


def _capacity(c: model.Capacity) -> str:
    where = {"stated": "stated by", "running_gauge": "from", "estimate": "estimated:"}
    return f"capacity {c.value:,} ({where[c.source]} {c.detail})"


def false_refusals_text(
    f: model.FalseRefusals | model.Unavailable | None, stage_label: Callable[[str], str]
) -> str | None:
    """Refusals made while a slot was free, their capacity, and the first few times."""
    if f is None:
        return None
    if isinstance(f, model.Unavailable):
        return f"False refusals: unavailable ({f.unavailable})"
    text = (
        f"False refusals (made while a slot was free): {f.count:,} of {f.refusals:,} "
        f"refusals ({_share(f.share_of_refusals)}), {f.rate:.1%} of requests; "
        f"{_capacity(f.capacity)}"
    )
    if len(f.by_stage) > 1:
        text += "; " + ", ".join(
            f"{stage_label(k)} {v.false:,} of {v.refusals:,}" for k, v in f.by_stage.items()
        )
    if f.t:
        first = ", ".join(f"{t:.2f} s" for t in f.t[:FIRST_TIMES])
        more = " ..." if f.count > FIRST_TIMES else ""
        text += f"; the first at {first}{more} (all listed: `outcomes.false_refusals.t`)"
    return text


def outcome_line(o: model.Outcomes | None) -> list[str]:
    """The terminal's line: the four main outcomes with the two shares, then any other
    outcome that some request had."""
    if o is None:
        return []
    c = o.counts
    text = (
        f"outcomes: served {c['served']:,}, queued {c['queued']:,}"
        f" ({_share(o.admitted_queued_share)} of admitted), refused fast"
        f" {c['refused_fast']:,}, slow {c['refused_slow']:,}"
        f" ({_share(o.refusals_slow_share)} of refusals)"
    )
    others = [_other(k, v) for k, v in c.items() if v and k not in ALWAYS_SHOWN]
    f = o.false_refusals
    if isinstance(f, model.FalseRefusals) and f.count:
        others.append(f"false refusals {f.count:,} ({_share(f.share_of_refusals)} of refusals)")
    return [text + "".join(f", {x}" for x in others)]


def _other(outcome: str, n: int) -> str:
    text = f"{outcome.replace('_', ' ')} {n:,}"
    return f"{text} (each {IN_DISGUISE})" if outcome == "refused_in_stream" else text


def _computed(frame: MetricFrame, run: RunInfo) -> model.Outcomes | None:
    """None for a run that judged no outcomes (saved before them)."""
    if frame.outcomes is None or run.outcome_basis is None:
        return None
    return outcomes_summary(frame, frame.outcomes, run.outcome_basis, run.duration_s)


SECTION = Section(
    "outcomes",
    "late",
    view=lambda s, plot: outcomes_view(s.outcomes, lambda key: stage_label(s, key), plot),
    lines=lambda s: outcome_line(s.outcomes),
    compute=_computed,
    figure="outcomes",
    filters={"outcome_share": _share},
)
