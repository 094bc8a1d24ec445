"""summary.json's `packet_loss`: what a [network] packet-loss impairment did (measured by
zqbench.impair.analysis): the loss and its window, P99 under loss against baseline, the
error share and the recovery time; one row per stage."""

from __future__ import annotations

from dataclasses import dataclass

from zqbench import summary as model
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import (
    Fact,
    Figure,
    count,
    ms,
    or_none,
    seconds,
    share,
    stage_label,
)


@dataclass(frozen=True)
class PacketLossView:
    """What a [network] packet-loss impairment did: the loss and its window, P99 under loss
    against baseline, the error share and the recovery time; one row per stage."""

    rows: tuple[Fact, ...]
    stages: tuple[tuple[str, model.LossStage], ...]  # each stage's label and its row
    figure: Figure | None  # latency and rolling P99 over send time, the loss shaded


times = or_none(".3g", "×")  # a stage's P99 over the baseline P99: "13×"


def _loss_windows(p: model.PacketLoss) -> str:
    """When the drop rules were in place, seconds since the start: "5.003–10.004 s"."""
    if not p.windows:
        return "never applied (see the run's notes)"
    spans = [
        f"{w.applied_s:.3f}–{w.removed_s:.3f} s"
        if w.removed_s is not None
        else f"from {w.applied_s:.3f} s, never removed"
        for w in p.windows
    ]
    return ", ".join(spans)


def _loss_p99(p: model.PacketLoss) -> str:
    """ "912 ms under loss against 70 ms baseline (13×, +842 ms)"."""
    if p.loss_p99_s is None or p.baseline_p99_s is None:
        return (
            f"{ms(p.loss_p99_s)} ms under loss; baseline {ms(p.baseline_p99_s)} ms"
            " (no ratio without both)"
        )
    delta = p.p99_delta_s if p.p99_delta_s is not None else p.loss_p99_s - p.baseline_p99_s
    sign = "+" if delta >= 0 else "−"
    return (
        f"{ms(p.loss_p99_s)} ms under loss against {ms(p.baseline_p99_s)} ms baseline"
        f" ({times(p.p99_ratio)}, {sign}{ms(abs(delta))} ms)"
    )


def loss_recovery(p: model.PacketLoss, *, brief: bool = False) -> str:
    """The recovery time after the loss, or that there was none within the run; `brief`
    leaves out the rule it was judged by (the terminal's line)."""
    r = p.recovery
    window = f"the P99 of the next {r.window_s:g} s of requests"
    within = f"within {r.tolerance:.0%} of the baseline P99"
    if r.recovered and r.recovery_s is not None:
        text = (
            f"recovered {seconds(r.recovery_s)} after the loss ended at {r.after_s:.2f} s"
            f" (t = {r.after_s + r.recovery_s:.2f} s)"
        )
        return text if brief else f"{text}: from there {window} is {within}"
    if p.baseline_p99_s is None:
        return "recovery unknown: no baseline stage before the loss to compare with"
    text = "did not recover within the run"
    return text if brief else f"{text} (at no time after the loss was {window} {within})"


def rows(s: model.Summary, p: model.PacketLoss) -> list[Fact]:
    """The section's rows, as the terminal shows them too."""
    impaired = ", ".join(stage_label(s, str(i)) for i in p.impaired_stages)
    return [
        Fact("loss", f"{p.loss * 100:g}% of packets, each direction, in {impaired}"),
        Fact("rules in place", _loss_windows(p)),
        Fact("dropped packets", count(p.dropped_packets)),
        Fact("latency P99", _loss_p99(p)),
        Fact("error share under loss", share(p.loss_error_share)),
        Fact("recovery", loss_recovery(p)),
    ]


def view_of(s: model.Summary, plot: Figure | None) -> PacketLossView | None:
    p = s.packet_loss
    if p is None:
        return None
    stages = tuple((stage_label(s, str(row.stage)), row) for row in p.stages)
    return PacketLossView(rows=tuple(rows(s, p)), stages=stages, figure=plot)


def lines(summary: model.Summary) -> list[str]:
    """Two lines: the loss and its window, then P99 under loss against baseline, the error
    share and the recovery."""
    loss = summary.packet_loss
    if loss is None:
        return []
    facts = {fact.label: fact.value for fact in rows(summary, loss)}
    return [
        f"packet loss: {facts['loss']}; rules in place {facts['rules in place']};"
        f" {facts['dropped packets']} packets dropped",
        f"  latency P99 {facts['latency P99']}; error share under loss"
        f" {facts['error share under loss']}; {loss_recovery(loss, brief=True)}",
    ]


SECTION = Section(
    "packet_loss",
    "body",
    view=view_of,
    lines=lines,
    compute=lambda frame, run: run.packet_loss,
    figure="packet_loss",
    filters={"loss_ratio": times},
)
