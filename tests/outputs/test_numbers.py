"""Reports print numbers a reader can skim: no exponents for long latencies."""

from __future__ import annotations

import pytest

from zqbench.metrics.sig_digits import significant
from zqbench.metrics.slo import format_value
from zqbench.outputs.view import ms


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (33838.2, 4, "33838"),
        (12345.6, 4, "12346"),
        (1234.56, 4, "1235"),
        (2.0, 4, "2"),
        (0.0123456, 4, "0.01235"),
        (1e-7, 4, "0.0000001"),
        (-3.5e6, 4, "-3500000"),
        (338.4, 3, "338"),
        (float("inf"), 4, "inf"),
    ],
)
def test_significant_digits_never_use_an_exponent(value: float, digits: int, text: str) -> None:
    assert significant(value, digits) == text


def test_a_34_second_latency_reads_in_milliseconds_in_every_report() -> None:
    assert ms(33.8382) == "33838"
    assert format_value(33.8382, "ms") == "33838 ms"
    assert format_value(0.25, "%") == "25%"
