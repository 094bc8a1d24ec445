"""summary.json's `reasoning`: what reasoning models and tool calls did.

Over the successful requests, from each sample's `carried` bits, `t_first_answer`,
`reasoning_tokens` and `tool_calls` (docs/design.md):

    thinking        t_first_answer - t_first_token: the thinking streamed before the first
                    text or tool-call token, over the requests that thought and answered
    reasoning_tokens  its mean over the requests that thought and have a count: the
                    server's (usage) where it gave one, else the thinking events counted
    tool calls      the requests whose answer called a tool, and the calls made

Absent when no answer carried thinking or a tool call: a plain model's run shows nothing.
TTFT stays the first token of any kind, so it is comparable across models and judges
admission; `ttfa` (a metric of its own, SLO key `ttfa:p99<...`) is the answer's.
"""

from __future__ import annotations

import numpy as np

from zqbench.dialects.base import OMITTED, REDACTED, TEXT, THINKING, TOOL
from zqbench.metrics import quantiles
from zqbench.metrics.frame import NS_PER_S, MetricFrame
from zqbench.metrics.sections.base import Section
from zqbench.metrics.sections.text import ms
from zqbench.summary import Reasoning, Summary, json_number


def reasoning(frame: MetricFrame) -> Reasoning | None:
    """None when no successful request's answer carried thinking or a tool call."""
    ok = frame.ok
    carried = frame.carried
    thought = ok & (carried & THINKING != 0)
    called = ok & (carried & TOOL != 0)
    if not np.any(thought | called):
        return None
    c = frame.columns
    answered = thought & (carried & (TEXT | TOOL) != 0)
    phase = (c.t_first_answer - c.t_first_token)[answered & ~np.isnan(c.t_first_answer)]
    phase = np.sort(phase) / NS_PER_S
    counts = frame.reasoning_tokens[thought & ~np.isnan(frame.reasoning_tokens)]
    counted = thought & ~np.isnan(frame.reasoning_tokens) & ~frame.reasoning_from_usage
    return Reasoning(
        requests=int(np.count_nonzero(ok)),
        thinking_requests=int(np.count_nonzero(thought)),
        redacted=int(np.count_nonzero(thought & (carried & REDACTED != 0))),
        omitted=int(np.count_nonzero(thought & (carried & OMITTED != 0))),
        unanswered=int(np.count_nonzero(thought & ~answered)),
        thinking_p50=json_number(quantiles.quantile(phase, 0.5)),
        thinking_p99=json_number(quantiles.quantile(phase, 0.99)),
        reasoning_tokens_mean=json_number(float(np.mean(counts)) if counts.size else None),
        reasoning_tokens_counted=int(np.count_nonzero(counted)),
        tool_requests=int(np.count_nonzero(called)),
        tool_calls=int(np.sum(frame.tool_calls[ok])),
    )


def thinking_text(r: Reasoning) -> str:
    """The thinking part of the terminal line and the pages' sentence."""
    if not r.thinking_requests:
        return "no answer carried thinking"
    parts = [f"{r.thinking_requests:,} of {r.requests:,} answers thought first"]
    if r.reasoning_tokens_mean is not None:
        counted = r.reasoning_tokens_counted
        source = (
            "" if not counted else
            " (counted by zqbench: no usage count)" if counted == r.thinking_requests else
            f" ({counted:,} counted by zqbench: no usage count)"
        )  # fmt: skip
        parts.append(f"{r.reasoning_tokens_mean:.4g} thinking tokens on average{source}")
    if r.redacted:
        parts.append(f"{r.redacted:,} redacted")
    if r.omitted:
        parts.append(f"{r.omitted:,} not shown (display omitted)")
    text = ", ".join(parts)
    if r.thinking_p50 is not None:
        text += (
            f": p50 {ms(r.thinking_p50)} ms (p99 {ms(r.thinking_p99)}) from the first token to"
            " the first answer token"
        )
    if r.unanswered:
        text += f"; {r.unanswered:,} only thought (no answer within max_tokens)"
    return text


def tools_text(r: Reasoning) -> str:
    if not r.tool_requests:
        return "no answer called a tool"
    return f"{r.tool_requests:,} answers called a tool ({r.tool_calls:,} calls)"


def lines(summary: Summary) -> list[str]:
    r = summary.reasoning
    if r is None:
        return []
    return [f"reasoning: {thinking_text(r)}; {tools_text(r)}"]


SECTION = Section(
    "reasoning",
    "body",
    lines=lines,
    compute=lambda frame, run: reasoning(frame),
    filters={"thinking_text": thinking_text, "tools_text": tools_text},
)
