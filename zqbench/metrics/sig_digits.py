"""Significant digits without exponents: a report reads `33838 ms`, never `3.384e+04 ms`."""

from __future__ import annotations

import math

import numpy as np


def significant(value: float, digits: int = 4) -> str:
    """`value` to `digits` significant digits, positional; a value of more integer digits
    keeps them all (33838.2 -> "33838"). `:g` switches to an exponent from 10**digits up,
    which hides a long latency's size from a reader who skims."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    return str(np.format_float_positional(value, precision=digits, fractional=False, trim="-"))
