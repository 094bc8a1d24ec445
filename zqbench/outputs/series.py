"""Time series for the plots: a run's per-request values cut into time bins.

Plots of millions of requests cannot draw every point, so they draw per-bin summaries:
counts (rates), status shares and percentile bands. Percentiles are the nearest-rank
order statistics of `zqbench.metrics.quantiles` (the one definition in zqbench), taken
per bin. All times here are seconds since the run's start; values keep their unit.
"""

from __future__ import annotations

import math

import numpy as np

from zqbench.metrics import quantiles

NICE_STEPS = (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def bin_width(span_s: float, *, max_bins: int = 240, min_width_s: float = 0.5) -> float:
    """A round bin width (s) giving at most `max_bins` bins over `span_s`, never finer than
    `min_width_s` (finer bins at low rates show Poisson noise, not the server)."""
    wanted = max(min_width_s, span_s / max_bins)
    for step in NICE_STEPS:
        if step >= wanted:
            return step
    return 600.0 * math.ceil(wanted / 600.0)


def edges(span_s: float, width_s: float) -> np.ndarray:
    """Bin edges 0, w, 2w ... covering [0, span_s] (at least one bin)."""
    n = max(1, math.ceil(span_s / width_s - 1e-9))
    return np.arange(n + 1) * width_s


def rate(times_s: np.ndarray, bin_edges: np.ndarray) -> np.ndarray:
    """Events per second in each bin (NaN times are ignored)."""
    counts, _ = np.histogram(times_s[~np.isnan(times_s)], bins=bin_edges)
    return counts / np.diff(bin_edges)


BAND_LEVELS = {"p50": 0.5, "p99": 0.99, "max": 1.0}  # what a time plot's bands draw


def percentile_bands(
    times_s: np.ndarray, values: np.ndarray, bin_edges: np.ndarray
) -> dict[str, np.ndarray]:
    """Nearest-rank percentiles of `values` in each time bin (one sort of the whole run), by
    BAND_LEVELS' name: "p50" -> one value per bin, NaN where a bin holds no value."""
    keep = ~np.isnan(times_s) & ~np.isnan(values)
    t, v = (times_s, values) if keep.all() else (times_s[keep], values[keep])
    n_bins = len(bin_edges) - 1
    # int32 bin numbers: a few hundred bins, and 4 bytes a request less in both copies
    which = np.clip(np.searchsorted(bin_edges, t, side="right") - 1, 0, n_bins - 1)
    which = which.astype(np.int32)
    order = np.lexsort((v, which))  # by bin, then by value: each bin's slice is sorted
    v_sorted, which_sorted = v[order], which[order]
    starts = np.searchsorted(which_sorted, np.arange(n_bins), side="left")
    stops = np.searchsorted(which_sorted, np.arange(n_bins), side="right")
    out = {name: np.full(n_bins, np.nan) for name in BAND_LEVELS}
    for b in np.flatnonzero(stops > starts):
        chunk = v_sorted[starts[b] : stops[b]]
        for name, q in BAND_LEVELS.items():
            out[name][b] = quantiles.quantile(chunk, q)
    return out


def shares(
    times_s: np.ndarray, keys: np.ndarray, bin_edges: np.ndarray, order: list[str]
) -> np.ndarray:
    """[len(order), n_bins] share of each key among the requests of each bin (0 if empty)."""
    n_bins = len(bin_edges) - 1
    which = np.clip(np.searchsorted(bin_edges, times_s, side="right") - 1, 0, n_bins - 1)
    counts = np.zeros((len(order), n_bins))
    for i, key in enumerate(order):
        counts[i] = np.bincount(which[keys == key], minlength=n_bins)[:n_bins]
    total = counts.sum(axis=0)
    return np.divide(counts, total, out=np.zeros_like(counts), where=total > 0)


def in_flight(t_send_s: np.ndarray, t_end_s: np.ndarray, grid_s: np.ndarray) -> np.ndarray:
    """Requests in flight at each grid time: sent at or before it and not yet ended."""
    sent = np.searchsorted(np.sort(t_send_s), grid_s, side="right")
    ended = np.searchsorted(np.sort(t_end_s), grid_s, side="right")
    return sent - ended


def window_times(t_send_s: np.ndarray, defined: np.ndarray, window: int) -> np.ndarray:
    """Mid send time of each consecutive window of `window` defined requests in send order,
    matching `zqbench.metrics.frame.dispatch_jitter` (trailing partial window dropped)."""
    t = np.sort(t_send_s[defined])
    n = len(t) // window
    if n == 0:
        return np.empty(0)
    return t[: n * window].reshape(n, window).mean(axis=1)


Curve = tuple[np.ndarray, np.ndarray, int]  # x, the values at x, how many values


def percentile_curve(sorted_values: np.ndarray, points: int = 400) -> Curve | None:
    """The HDR percentile curve of ascending values, infinities left out: x = log10(1 / (1 -
    q)) on a grid, so a million values draw as a few hundred points (nearest-rank
    quantiles); the last point is the maximum, at x = log10(n). None without a finite one."""
    finite = sorted_values[np.isfinite(sorted_values)]
    n = len(finite)
    if n == 0:
        return None
    top = np.log10(n) if n > 1 else 1.0
    x = np.linspace(0.0, top, points)
    q = np.append(1.0 - 10.0 ** (-x[:-1]), 1.0)
    return x, np.array([quantiles.quantile(finite, float(qi)) for qi in q], dtype=float), n
