"""The report's figures, as PNG files. The only zqbench module that imports matplotlib.

    plots = render_plots(summary, frame, out_dir / PLOTS_DIR, gpu_samples=None)  # [Plot]

matplotlib is imported lazily (inside functions) with the Agg backend through
`matplotlib.figure.Figure`, never pyplot: no global figure state, no GUI, safe in threads.
A figure named NAME is written to plots_dir/NAME.png; a figure whose data the run does
not have (no timing headers, no telemetry) is skipped, not drawn empty. Runs with many
requests are drawn as per-bin percentile bands instead of one point per request
(SCATTER_MAX), so a million samples render in about a second.
Times on every x axis are seconds since the run's start; durations are milliseconds.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from zqbench.metrics import quantiles
from zqbench.metrics.frame import JITTER_WINDOW, NS_PER_S, MetricFrame, dispatch_jitter
from zqbench.outputs import series
from zqbench.outputs.advice_model import AdviceReport
from zqbench.safe_files import write_bytes
from zqbench.summary import OverTime, PacketLoss, ServerQueue, Stage, Summary

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SCATTER_MAX = 20_000  # above this many points a time plot draws percentile bands
DPI = 100
MS = 1e3
FLOOR_MS = 1e-3  # 1 µs: where values <= 0 are drawn on a log axis
COLORS = {
    "latency": "#1f77b4",
    "latency_corrected": "#9467bd",
    "ttft": "#2ca02c",
    "reject": "#d62728",
    "offered": "#7f7f7f",
    "sent": "#1f77b4",
    "ok": "#2ca02c",
    "queue": "#ff7f0e",
    "dispatch": "#1f77b4",
}
RUN_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
# Time plots keep their legend right of the axes, so it never hides data.
OUTSIDE_LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": 8}
PERCENTILE_TICKS = {
    "50%": 0.5,
    "90%": 0.9,
    "99%": 0.99,
    "99.9%": 0.999,
    "99.99%": 0.9999,
    "99.999%": 0.99999,
}


def _legend(ax: Any) -> None:
    """A legend when something was drawn; otherwise say so on the empty axes."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**OUTSIDE_LEGEND)
    else:
        _centered(ax, "nothing to show: no request in this group")


def _centered(ax: Axes, message: str, **style: Any) -> None:
    """A grey message in the middle of the axes."""
    ax.text(
        0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4", **style
    )


# A run's figure as its function draws it: the figure, its title, and its caption (one
# sentence: how to read it).
Drawn: TypeAlias = "tuple[Figure, str, str]"


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, e.g. "timeline"
    title: str
    caption: str  # one sentence: how to read it
    path: Path  # plots_dir/<name>.png


# --- shared helpers ---------------------------------------------------------------------


def _figure(rows: int = 1, cols: int = 1, *, height: float = 3.6, **kw: Any) -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, height * rows), dpi=DPI, layout="constrained")
    fig.subplots(rows, cols, squeeze=False, **kw)
    return fig


def _save(plots_dir: Path, name: str, fig: Figure, title: str, caption: str) -> Plot:
    """Write the figure to plots_dir/<name>.png."""
    path = plots_dir / f"{name}.png"
    png = io.BytesIO()
    # No "Software" metadata: the same run renders byte-identical PNGs on any version.
    fig.savefig(png, format="png", dpi=DPI, metadata={"Software": None})
    write_bytes(path, png.getvalue())  # never through a link planted at the name
    return Plot(name, title, caption, path)


def _ms_floor(values_s: np.ndarray) -> np.ndarray:
    """Seconds -> ms, values <= 0 raised to 1 µs so a log axis can show them."""
    return np.maximum(values_s * MS, FLOOR_MS)


MAX_DRAWN_STAGES = 60  # more stages than this: no boundary lines or names on the plots
STAGE_TEXT: dict[str, Any] = {"va": "bottom", "fontsize": 8, "color": "0.3"}  # above the axes


def _stage_lines(ax: Axes, stages: Sequence[Stage], span_s: float, label: bool) -> list[str]:
    """Dotted lines at stage boundaries; names above the axes where the stage is wide
    enough for its name. A narrow stage is numbered there, so labels never overlap; the
    keys of the numbered ones ("1 = pulse") are returned, for `_stage_key`."""
    numbered: list[str] = []
    if len(stages) > MAX_DRAWN_STAGES:
        # Thousands of lines and labels would be a grey smear, and took minutes to lay out.
        if label:
            note = f"{len(stages)} stages: boundaries drawn for {MAX_DRAWN_STAGES} at most"
            ax.text(0.0, 1.01, note, transform=ax.transAxes, ha="left", **STAGE_TEXT)
        return numbered
    for stage in stages:
        if stage.start > 0:
            ax.axvline(stage.start, color="0.4", linestyle=":", linewidth=1)
        if not label:
            continue
        width = (stage.end - stage.start) / max(span_s, 1e-9)
        name = stage.name
        text = name if width * 95 > len(name) + 4 else str(stage.index)
        if text != name:
            numbered.append(f"{stage.index} = {name}")
        mid = (stage.start + min(stage.end, span_s)) / 2
        where = ax.get_xaxis_transform()  # x in data, y in axes
        ax.text(mid, 1.01, text, transform=where, ha="center", clip_on=False, **STAGE_TEXT)
    return numbered


def _stage_key(ax: Axes, numbered: Sequence[str]) -> None:
    """Under the axes, on the right: what each numbered stage label stands for."""
    if not numbered:
        return
    ax.annotate(
        "stages: " + ", ".join(numbered),
        xy=(1.0, 0.0),
        xycoords="axes fraction",
        xytext=(0, -24),
        textcoords="offset points",
        ha="right",
        va="top",
        fontsize=7,
        color="0.3",
    )


def _log_panel(ax: Axes, ylabel: str) -> None:
    """The end of a log-scaled top panel (its x axis is the one below's)."""
    _log_axis(ax)
    ax.set_ylabel(ylabel)
    _legend(ax)
    ax.grid(True, alpha=0.3)


def _hline(ax: Axes, y: float, label: str, *, color: str = "k", linestyle: str = "--") -> None:
    """A reference line (a threshold, a baseline) named in the legend."""
    ax.axhline(y, color=color, linestyle=linestyle, linewidth=1, label=label)


def _no_data(ax: Axes, message: str) -> None:
    """A message in place of an empty panel (x ticks kept: the axis may be shared)."""
    _centered(ax, message, fontsize=9, wrap=True)
    ax.set_yticks([])


def _log_axis(ax: Axes, axis: str = "y") -> None:
    """A log axis labelled in plain numbers (0.1, 2, 500), not 5x10^2. Minor ticks are
    labelled too when the axis spans few decades (all of them within one decade, only the
    2s and 5s within two), so an axis never shows a single lonely label or a crowd."""
    import math

    from matplotlib.ticker import FuncFormatter

    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target = ax.yaxis if axis == "y" else ax.xaxis
    low, high = ax.get_ylim() if axis == "y" else ax.get_xlim()
    ratio = high / low if low > 0 else math.inf

    def minor(v: float, _pos: int) -> str:
        if v <= 0 or ratio > 100:
            return ""
        lead = round(v / 10 ** math.floor(math.log10(v) + 1e-9))
        return f"{v:g}" if ratio < 12 or lead in (2, 5) else ""

    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(minor))


class RunData:
    """What every figure reads from one run: times in seconds, the metric frame, the summary."""

    def __init__(
        self,
        summary: Summary,
        frame: MetricFrame,
        gpu: Mapping[str, np.ndarray] | None = None,  # GPU readings: t_s, gpu, util
    ) -> None:
        self.summary = summary
        self.frame = frame
        self.gpu = gpu
        c = frame.columns
        self.t_send = c.t_send / NS_PER_S
        span = float(np.nanmax(c.t_end)) / NS_PER_S if frame.n else 0.0
        self.span = max(span, summary.duration, 1e-3)
        self.width = series.bin_width(self.span)
        self.edges = series.edges(self.span, self.width)

    # Computed when a figure reads them, not kept: at 3,600,000 requests each is 27 MiB that
    # the figures' own arrays stack on (#44).
    @property
    def t_end(self) -> np.ndarray:
        return self.frame.columns.t_end / NS_PER_S

    @property
    def t_intended(self) -> np.ndarray:
        return self.frame.columns.t_intended / NS_PER_S

    def values_s(self, metric: str) -> np.ndarray:
        return self.frame.values[metric] / NS_PER_S

    def available(self, metric: str) -> bool:
        return self.frame.unavailable_reason(metric) is None

    def time_series(
        self,
        ax: Axes,
        v_ms: np.ndarray,
        color: str,
        label: str,
        *,
        t_s: np.ndarray | None = None,
        marker: str = ".",
    ) -> None:
        """One point per request by send time (or `t_s`), or p50-p99 bands with a max line
        when there are many."""
        t_s = self.t_send if t_s is None else t_s
        keep = ~np.isnan(t_s) & ~np.isnan(v_ms)
        t_s, v_ms = t_s[keep], v_ms[keep]
        if len(t_s) == 0:
            return
        if len(t_s) <= SCATTER_MAX:
            dots: dict[str, Any] = {"s": 4 if marker == "." else 10, "linewidths": 0.8}
            each = f"{label} (each request)"
            ax.scatter(t_s, v_ms, marker=marker, color=color, alpha=0.5, label=each, **dots)
            return
        levels = series.percentile_bands(t_s, v_ms, self.edges)
        x = (self.edges[:-1] + self.edges[1:]) / 2  # bin centres
        low, high, band = levels["p50"], levels["p99"], f"{label} p50-p99 per bin"
        ax.fill_between(x, low, high, color=color, alpha=0.25, step="mid", label=band)
        lines = (("p50", {"linewidth": 1.2}), ("max", {"linewidth": 0.8, "linestyle": "--"}))
        for level, style in lines:
            name = f"{label} {level}"
            ax.plot(x, levels[level], color=color, drawstyle="steps-mid", label=name, **style)

    def stage_lines(self, axes: Sequence[Axes]) -> None:
        """Stage boundaries on every panel; names on the top one, the key under the last."""
        numbered: list[str] = []
        for i, ax in enumerate(axes):
            numbered += _stage_lines(ax, self.summary.stages, self.span, label=(i == 0))
        _stage_key(axes[-1], numbered)

    def finish(
        self,
        ax: Axes,
        *,
        ylabel: str,
        xlabel: str,
        legend: Literal["outside", "upper left", "lower right"] = "outside",
        panels: Sequence[Axes] = (),
    ) -> None:
        """The end of a time plot's bottom panel: the run's span, labels, legend, grid, and
        the stage lines on it and on the `panels` above it."""
        ax.set_xlim(0, self.span)
        ax.set_ylabel(ylabel)
        ax.set_xlabel(xlabel)
        if legend == "outside":
            _legend(ax)
        else:
            ax.legend(loc=legend, fontsize=8)
        ax.grid(True, alpha=0.3)
        self.stage_lines([*panels, ax])


# --- the figures ----------------------------------------------------------------------


def timeline(run: RunData) -> Drawn:
    fig = _figure(2, 1, height=2.9, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    top, bottom = fig.axes
    run.time_series(top, run.values_s("latency") * MS, COLORS["latency"], "latency (ok)")
    if run.available("time_to_reject"):
        reject_ms = _ms_floor(run.values_s("time_to_reject"))
        run.time_series(top, reject_ms, COLORS["reject"], "time to reject", marker="x")
    _log_panel(top, "latency (ms, log)")

    ok_end = np.where(run.frame.ok, run.t_end, np.nan)
    rates: list[tuple[np.ndarray, str, dict[str, Any]]] = [  # (event times, label, style)
        (run.t_send, "sent (achieved)", {"color": COLORS["sent"], "linewidth": 1.2}),
        (ok_end, "completed ok", {"color": COLORS["ok"], "linewidth": 1.2, "linestyle": "--"}),
    ]
    if run.frame.columns.t_intended.size and not np.all(np.isnan(run.t_intended)):
        offered = {"color": COLORS["offered"], "linewidth": 2.2, "alpha": 0.6}
        rates.insert(0, (run.t_intended, "offered (schedule)", offered))
    for times, label, style in rates:
        rate = series.rate(times, run.edges)
        bottom.plot(run.edges[:-1], rate, drawstyle="steps-post", label=label, **style)
    bottom.set_ylim(bottom=0)
    per_bin = f"requests/s ({run.width:g} s bins)"
    run.finish(bottom, ylabel=per_bin, xlabel="time since start (s)", panels=[top])
    return (
        fig,
        "Latency and request rate over time",
        "Top: latency of each request by send time (refusals as red x). Bottom: the"
        " schedule's offered rate, the rate actually sent, and successful completions."
        " Dotted lines are stage boundaries.",
    )


def _percentile_axis(ax: Axes, max_x: float) -> None:
    ticks = {k: np.log10(1 / (1 - q)) for k, q in PERCENTILE_TICKS.items()}
    # A tick a hair beyond the data (n = 99 reaches 99% at 1.996) is still shown.
    shown = {k: v for k, v in ticks.items() if v <= max_x + 0.05}
    ax.set_xticks(list(shown.values()), list(shown.keys()))
    ax.set_xlim(0, max(max_x, 0.5, *shown.values()))
    ax.set_xlabel("percentile (max at right end)")
    ax.grid(True, which="both", alpha=0.3)


def _draw_percentiles(
    ax: Axes, curves: list[tuple[str, series.Curve | None, str]], title: str, *, empty: str
) -> None:
    """One HDR panel: a line per (label, percentile curve in seconds, color); without any,
    `empty` says why."""
    ax.set_title(title, fontsize=10)
    if not curves:
        _no_data(ax, empty)
        return
    max_x = 0.0
    for label, curve, color in curves:
        if curve is None:
            continue
        x, values_s, n = curve
        counted = f"{label} (n={n:,})"
        ax.plot(x, np.maximum(values_s * MS, FLOOR_MS), color=color, linewidth=1.4, label=counted)
        max_x = max(max_x, float(x[-1]))
    _log_axis(ax)
    _percentile_axis(ax, max_x)
    ax.legend(loc="upper left", fontsize=7, framealpha=0.85)


HDR_METRICS = ("latency", "latency_corrected", "ttft")


def percentiles(run: RunData) -> Drawn:
    fig = _figure(1, len(HDR_METRICS), height=3.8)
    for ax, metric in zip(fig.axes, HDR_METRICS, strict=True):
        reason = run.frame.unavailable_reason(metric)
        curves = []
        classes = run.frame.classes if reason is None else ()
        for i, cls in enumerate(classes):
            keep = run.frame.mask(request_class=cls) if len(classes) > 1 else None
            label = cls if len(classes) > 1 else "all requests"
            curve = series.percentile_curve(run.frame.sorted_seconds(metric, keep))
            curves.append((label, curve, RUN_COLORS[i % len(RUN_COLORS)]))
        _draw_percentiles(ax, curves, metric, empty=f"unavailable:\n{reason}")
    fig.axes[0].set_ylabel("ms (log)")
    return (
        fig,
        "Latency percentile distribution (HDR)",
        "Value at each percentile, one line per request class; the x axis stretches"
        " the tail (each tick is ten times rarer). Successful requests only.",
    )


def _log_bins(values_ms: np.ndarray, bins: int = 60) -> list[float]:
    positive = values_ms[values_ms > 0]
    if not positive.size:
        # Every value 0 (a stream that arrived in one read: no gap between its tokens): an
        # empty panel on the floor's decade, not a crash of the whole report.
        return np.geomspace(FLOOR_MS / 1.5, FLOOR_MS * 1.5, bins + 1).tolist()
    low, high = float(positive.min()), float(positive.max())
    if high <= low * 1.0001:
        low, high = low / 1.5, high * 1.5
    return np.geomspace(low, high, bins + 1).tolist()


def histograms(run: RunData) -> Drawn | None:
    panels = [("ttft", "TTFT"), ("itl", "inter-token latency (mean gap per request)")]
    panels = [(m, t) for m, t in panels if run.available(m)]
    if not panels:
        return None
    fig = _figure(1, len(panels), height=3.4)
    for ax, (metric, title) in zip(fig.axes, panels, strict=True):
        sorted_s = run.frame.sorted_seconds(metric)
        values_ms = sorted_s * MS
        ax.hist(
            values_ms[values_ms > 0], bins=_log_bins(values_ms), color=COLORS["ttft"], alpha=0.75
        )
        for name, q, style in (("p50", 0.5, "-"), ("p99", 0.99, "--")):
            v = quantiles.quantile(sorted_s, q)
            if v is not None:
                at = v * MS
                ax.axvline(
                    at, color="k", linestyle=style, linewidth=1, label=f"{name} = {at:.3g} ms"
                )
        _log_axis(ax, "x")
        ax.set_xlabel(f"{metric} (ms, log)")
        ax.set_ylabel("requests")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    return (
        fig,
        "TTFT and inter-token latency",
        "How many successful requests fell in each (log-spaced) bin, with p50 and p99 marked.",
    )


def _status_color(key: str, i: int) -> str:
    if key.startswith("2") and ":" not in key:
        return "#2ca02c"
    fixed = {"429": "#ff7f0e", "503": "#d62728", "529": "#9467bd", "500": "#8c564b"}
    if key in fixed:
        return fixed[key]
    if key.endswith(":refused_in_stream"):  # a refusal in disguise: the outcome's colour
        return OUTCOME_COLORS["refused_in_stream"]
    if key.startswith("transport:"):
        return ("#7f7f7f", "#bcbd22", "#17becf", "#c7c7c7")[i % 4]
    return ("#e377c2", "#8c564b", "#bcbd22", "#17becf")[i % 4]


def status_mix(run: RunData) -> Drawn | None:
    keys = run.frame.status_keys
    counts = run.summary.status_codes
    if not counts:
        return None  # no request recorded (a run killed before its first batch)
    order = list(counts)[:7]
    if len(counts) > 7:
        keys = np.where(np.isin(keys, order), keys, "other")
        order.append("other")
    shares = series.shares(run.t_send, keys, run.edges, order)
    colors = [_status_color(k, i) for i, k in enumerate(order)]
    fig = _stacked_shares(run, run.edges, run.width, shares, order, colors, "status")
    return (
        fig,
        "Status mix over time",
        "Share of each HTTP status or transport error among the requests sent in each"
        " bin: how errors migrate as load changes.",
    )


def _stacked_shares(
    run: RunData,
    edges: np.ndarray,
    width: float,
    shares: np.ndarray,
    order: list[str],
    colors: list[str],
    title: str,
) -> Figure:
    """Shares per bin ([len(order), bins] of 1) stacked to 100 %, each bin a flat step."""
    fig = _figure(1, 1, height=3.2)
    ax = fig.axes[0]
    x = np.repeat(edges, 2)[1:-1]  # step edges, so a bin's share spans the whole bin
    stacked = np.repeat(shares * 100, 2, axis=1)
    ax.stackplot(x, stacked, labels=order, colors=colors, alpha=0.85)
    ax.set_ylim(0, 100)
    ax.set_xlim(0, run.span)
    ax.set_ylabel(f"share of requests (%, {width:g} s bins)")
    ax.set_xlabel("send time since start (s)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title=title)
    run.stage_lines([ax])
    return fig


# Fixed per outcome (zqbench.metrics.outcomes.OUTCOMES), whichever of them a run has.
OUTCOME_COLORS = {
    "served": "#2ca02c",
    "queued": "#ff7f0e",
    "refused_fast": "#1f77b4",
    "refused_slow": "#d62728",
    "refused_in_stream": "#aec7e8",
    "timed_out": "#9467bd",
    "failed": "#404040",
    "interrupted": "#c7c7c7",
    "undetermined": "#8c564b",
}


def outcomes(run: RunData) -> Drawn | None:
    """Each outcome's share of the requests sent per bin (summary.json's
    `outcomes.over_time`): where a queue formed and drained."""
    judged = run.summary.outcomes
    if judged is None or not isinstance(judged.over_time, OverTime):
        return None  # a run from before outcomes, or one that sent nothing
    t = judged.over_time
    order = [k for k in OUTCOME_COLORS if any(t.counts.get(k, ()))]
    if not order or not t.start_s:
        return None
    counts = np.array([t.counts[k] for k in order], dtype=float)
    total = counts.sum(axis=0)
    shares = np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)
    edges = np.append(np.asarray(t.start_s, dtype=float), t.start_s[-1] + t.bin_s)
    colors = [OUTCOME_COLORS[k] for k in order]
    fig = _stacked_shares(run, edges, t.bin_s, shares, order, colors, "outcome")
    return (
        fig,
        "Outcomes over time",
        "Share of each outcome among the requests sent in each bin: a queue formed where"
        " queued or refused_slow rises, and drained where they fall back and served (or"
        " refused_fast) returns.",
    )


def dispatch(run: RunData) -> Drawn | None:
    shown = [
        (metric, color)
        for metric, color in (("dispatch_delay", "dispatch"), ("server_queue", "queue"))
        if run.available(metric)
    ]
    if not shown:
        return None
    has_delay = run.available("dispatch_delay")
    fig = _figure(2, 1, height=2.8, sharex=True)
    top, bottom = fig.axes
    for metric, color in shown:
        values_ms = _ms_floor(run.values_s(metric))
        run.time_series(top, values_ms, COLORS[color], metric)
    _log_panel(top, "ms (log)")
    delay_ns = run.frame.values["dispatch_delay"]
    jitter = dispatch_jitter(delay_ns, run.frame.columns.t_send) / NS_PER_S * MS
    if has_delay and len(jitter):
        centers = series.window_times(run.t_send, ~np.isnan(delay_ns), JITTER_WINDOW)
        label = f"std per {JITTER_WINDOW} requests"
        style: dict[str, Any] = {"marker": "o", "markersize": 3, "linewidth": 1}
        bottom.plot(centers, jitter, color=COLORS["dispatch"], label=label, **style)
        for slo in run.summary.slos:
            if slo.metric == "dispatch_jitter":
                _hline(bottom, slo.threshold * MS, f"SLO {slo.expr}")
        bottom.set_ylim(bottom=0)
        bottom.legend(loc="upper left", fontsize=8)
    else:
        _no_data(bottom, f"dispatch_jitter: no complete window of {JITTER_WINDOW} requests")
    bottom.set_ylabel("dispatch_jitter (ms)")
    bottom.set_xlabel("send time since start (s)")
    bottom.set_xlim(0, run.span)
    bottom.grid(True, alpha=0.3)
    run.stage_lines(fig.axes)
    return (
        fig,
        "Server queue, dispatch delay and jitter",
        "Top: time queued in the server (timing headers) and from send to the first"
        " compute step. Bottom: the jitter of dispatch_delay over consecutive windows"
        " of requests.",
    )


def gpu(run: RunData) -> Drawn | None:
    """GPU busy fraction over time; shaded where at least one request was in flight."""
    if run.gpu is None or len(run.gpu["t_s"]) == 0:
        return None
    fig = _figure(1, 1, height=3.0)
    ax = fig.axes[0]
    grid = np.linspace(0, run.span, 4000)
    busy = series.in_flight(run.t_send, run.t_end, grid) > 0
    shade: dict[str, Any] = {"color": "#1f77b4", "alpha": 0.12, "linewidth": 0}
    ax.fill_between(grid, 0, 100, where=busy, step="mid", label="≥1 request in flight", **shade)
    t, util, dev = run.gpu["t_s"], run.gpu["util"], run.gpu["gpu"]
    for i, g in enumerate(np.unique(dev)):
        sel, color = dev == g, RUN_COLORS[i % len(RUN_COLORS)]
        ax.plot(t[sel], util[sel] * 100, linewidth=1, color=color, label=f"GPU {g} utilization")
    density = run.summary.telemetry.get("gpu_density")
    if density is not None:
        ax.plot([], [], " ", label=f"gpu_density = {density:.1%}")
    ax.set_ylim(0, 105)
    run.finish(ax, ylabel="busy (%)", xlabel="time since start (s)", legend="lower right")
    return (
        fig,
        "GPU utilization",
        "GPU busy fraction from telemetry; shaded spans had at least one request in"
        " flight (gpu_density averages only those).",
    )


def schedule_lag(run: RunData) -> Drawn | None:
    if not run.available("schedule_lag"):
        return None
    fig = _figure(1, 1, height=3.0)
    ax = fig.axes[0]
    lag_ms = _ms_floor(run.values_s("schedule_lag"))
    run.time_series(ax, lag_ms, COLORS["offered"], "schedule_lag", t_s=run.t_intended)
    limit = run.summary.validity.thresholds.max_schedule_lag_p99_s
    if limit:
        label = f"validity limit on p99 ({limit * MS:g} ms)"
        _hline(ax, limit * MS, label, color=COLORS["reject"])
    p99 = quantiles.quantile(run.frame.sorted_seconds("schedule_lag"), 0.99)
    if p99 is not None:  # in the legend: a title would collide with the stage names
        ax.plot([], [], " ", label=f"measured p99 = {p99 * MS:.3g} ms")
    _log_axis(ax)
    run.finish(
        ax,
        ylabel="send - intended (ms, log)",
        xlabel="intended send time since start (s)",
        legend="upper left",
    )
    return (
        fig,
        "Did the generator hold the schedule?",
        "How late each request was sent relative to its intended time; values at or"
        " below 1 µs are drawn at 1 µs. Above the red line at p99 the run is invalid.",
    )


def server_queue(run: RunData) -> Drawn | None:
    """Requests waiting and running at the server, from its own metrics, over the run."""
    q = run.summary.server_queue
    if not isinstance(q, ServerQueue) or not q.over_time.t:
        return None
    fig = _figure(1, 1, height=3.0)
    ax = fig.axes[0]
    t = np.asarray(q.over_time.t, dtype=float)
    for label, values, color in (
        ("waiting", q.over_time.waiting, COLORS["queue"]),
        ("running", q.over_time.running, COLORS["dispatch"]),
    ):
        y = np.asarray([np.nan if v is None else v for v in values], dtype=float)
        if not np.all(np.isnan(y)):
            ax.step(t, y, where="post", linewidth=1.2, color=color, label=f"requests {label}")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # requests come whole
    ax.set_ylim(bottom=0)
    run.finish(ax, ylabel="requests", xlabel="time since start (s)", legend="upper left")
    return (
        fig,
        f"Server queue from {q.engine_name}'s metrics",
        f"Requests waiting for and holding a slot at the server, as its /metrics said at"
        f" each scrape ({q.scrapes} scrapes).",
    )


ROLLING_POINTS = 400  # at most this many window starts on the rolling P99 line


def rolling_p99(
    t_send_s: np.ndarray, latency_s: np.ndarray, span_s: float, window_s: float, min_n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(t, P99) of the successful requests sent in [t, t + window_s), t on a grid across
    the run: the forward window the recovery time is judged on (zqbench.impair.analysis).
    NaN where the window runs past the end or holds fewer than `min_n` requests."""
    keep = ~np.isnan(latency_s)
    order = np.argsort(t_send_s[keep], kind="stable")
    t, lat = t_send_s[keep][order], latency_s[keep][order]
    step = max(window_s / 8, span_s / ROLLING_POINTS)
    starts = np.arange(0.0, max(span_s - window_s, 0.0) + 1e-9, step)
    lo = np.searchsorted(t, starts, side="left")
    hi = np.searchsorted(t, starts + window_s, side="left")
    p99 = np.full(len(starts), np.nan)
    for k in np.flatnonzero(hi - lo >= min_n):
        value = quantiles.quantile(np.sort(lat[lo[k] : hi[k]]), 0.99)
        p99[k] = np.nan if value is None else value
    return starts, p99


def _loss_marks(ax: Axes, p: PacketLoss, span_s: float) -> None:
    """The loss windows shaded, the baseline P99 and its tolerance, the recovery point."""
    for i, w in enumerate(p.windows):
        end = span_s if w.removed_s is None else w.removed_s
        label = f"rules in place ({p.loss * 100:g}% loss)" if i == 0 else None
        ax.axvspan(w.applied_s, end, color=COLORS["reject"], alpha=0.12, linewidth=0, label=label)
    r = p.recovery
    if p.baseline_p99_s is not None:
        base_ms = p.baseline_p99_s * MS
        _hline(ax, base_ms, f"baseline P99 = {base_ms:.3g} ms")
        tolerated = base_ms * (1 + r.tolerance)
        _hline(ax, tolerated, f"recovered below (+{r.tolerance:.0%})", linestyle=":")
    if r.recovered and r.recovery_s is not None:
        at = r.after_s + r.recovery_s
        label = f"recovered at {at:.2f} s (+{r.recovery_s:.3g} s)"
        ax.axvline(at, color=COLORS["ok"], linewidth=1.6, label=label)
    else:
        ax.plot([], [], " ", label="did not recover within the run")


def packet_loss(run: RunData) -> Drawn | None:
    """Latency by send time with its rolling P99, the loss shaded and the recovery marked."""
    p = run.summary.packet_loss
    if p is None:
        return None
    fig = _figure(1, 1, height=3.4)
    ax = fig.axes[0]
    latency_s = run.values_s("latency")
    run.time_series(ax, latency_s * MS, COLORS["latency"], "latency (ok)")
    r = p.recovery
    t, p99 = rolling_p99(run.t_send, latency_s, run.span, r.window_s, r.min_requests)
    label = f"rolling P99 (sends in [t, t + {r.window_s:g} s))"
    ax.plot(t, p99 * MS, color=COLORS["queue"], linewidth=1.6, drawstyle="steps-post", label=label)
    _loss_marks(ax, p, run.span)
    _log_axis(ax)
    run.finish(ax, ylabel="latency (ms, log)", xlabel="send time since start (s)")
    return (
        fig,
        "Latency under packet loss",
        "Each successful request's latency by send time, and the P99 of the requests sent in"
        f" the {r.window_s:g} s after each point. Shaded: the drop rules were in place. The"
        " green line is where that P99 came back within"
        f" {r.tolerance:.0%} of the baseline P99 (the recovery time).",
    )


def render_plots(
    summary: Summary,
    frame: MetricFrame,
    plots_dir: Path,
    *,
    gpu_samples: Mapping[str, np.ndarray] | None = None,
) -> list[Plot]:
    """Every figure the run has data for, written to plots_dir/<name>.png, each named by
    the function that draws it."""
    run = RunData(summary, frame, gpu_samples)
    plots = []
    for draw in (
        timeline,
        percentiles,
        histograms,
        status_mix,
        outcomes,
        dispatch,
        gpu,
        schedule_lag,
        server_queue,
        packet_loss,
    ):
        drawn = draw(run)
        if drawn is not None:
            plots.append(_save(plots_dir, draw.__name__, *drawn))
    return plots


# --- comparison ---------------------------------------------------------------------------


def compare_percentiles(
    runs: Sequence[tuple[str, Mapping[str, series.Curve | None]]],
    metrics: Sequence[str],
    plots_dir: Path,
) -> Plot:
    """HDR percentile curves of several runs overlaid, one panel per metric; each run gives
    its curve of each metric (None: it has none)."""
    fig = _figure(1, len(metrics), height=3.8)
    for ax, metric in zip(fig.axes, metrics, strict=True):
        curves = [
            (label, curves_of[metric], RUN_COLORS[i % len(RUN_COLORS)])
            for i, (label, curves_of) in enumerate(runs)
            if curves_of.get(metric) is not None
        ]
        _draw_percentiles(ax, curves, metric, empty="unavailable in every run")
    fig.axes[0].set_ylabel("ms (log)")
    return _save(
        plots_dir,
        "compare_percentiles",
        fig,
        "Percentile distributions, overlaid",
        "Each run's value at each percentile (successful requests); lower is better.",
    )


def advice(report: AdviceReport, plots_dir: Path) -> Plot:
    """`zqbench sweep --server-cmd`: admitted throughput and TTFT p99 per setting, the
    recommended one marked; a setting that never ran is an empty slot."""
    fig = _figure(1, 2, height=3.8)
    ax_rate, ax_ttft = fig.axes
    x = np.arange(len(report.settings))
    labels = [s.label.replace(" ", "\n") for s in report.settings]  # a param a line
    rec = report.recommendation
    colors = [
        COLORS["ok"] if rec is not None and s.index == rec.setting else COLORS["offered"]
        for s in report.settings
    ]
    rates = [s.admitted_per_s or 0.0 for s in report.settings]
    ax_rate.bar(x, rates, color=colors)
    ax_rate.set_ylabel("admitted (req/s)")
    ttft = [
        np.nan if s.ttft_p99 is None or s.ttft_p99 == "inf" else float(s.ttft_p99) * MS
        for s in report.settings
    ]
    ax_ttft.bar(x, ttft, color=colors)
    ax_ttft.set_ylabel("TTFT p99 (ms, log)")
    if any(v > 0 for v in ttft if not np.isnan(v)):
        ax_ttft.set_yscale("log")
    at_foot: dict[str, Any] = {"ha": "center", "va": "bottom", "fontsize": 8}
    for ax in (ax_rate, ax_ttft):
        many = len(labels) > 4
        ax.set_xticks(
            x, labels, rotation=30 if many else 0, ha="right" if many else "center", fontsize=8
        )
        for i, s in enumerate(report.settings):
            foot = ax.get_ylim()[0]
            if s.state != "ran":
                ax.text(i, foot, s.state, color="0.4", **at_foot)
            elif not s.passed:
                ax.text(i, 0, s.verdict or "", color=COLORS["reject"], **at_foot)
    if rec is not None:
        ax_rate.annotate(
            "recommended",
            (rec.setting, rates[rec.setting]),
            ha="center",
            va="bottom",
            xytext=(0, 3),
            textcoords="offset points",
            color=COLORS["ok"],
            fontsize=9,
        )
    return _save(
        plots_dir,
        "advice",
        fig,
        "Admitted throughput and TTFT p99 per setting",
        "Each setting's admitted requests per second (left) and TTFT p99 (right); the "
        "recommended setting (green) admits the most with its SLOs holding; a failed verdict "
        "is marked in red at the bar's foot.",
    )
