"""#25 item 12: SLO thresholds and TOML values that used to crash, or fail only after the
whole load, are one-line errors (exit 2) before any traffic."""

from __future__ import annotations

from pathlib import Path

import pytest

from zqbench.errors import ScenarioError, UsageError
from zqbench.metrics.slo import parse_slo
from zqbench.scenario import load_scenario

LOAD = '[load]\nexecutor = "constant-arrival-rate"\nrate = 5\nduration = "1s"\n'


def test_a_threshold_past_the_largest_float_is_refused_before_the_load() -> None:
    with pytest.raises(UsageError) as err:
        parse_slo("latency:p99<2e308ms")
    assert err.value.message == (
        "bad SLO 'latency:p99<2e308ms': the threshold must be a finite number "
        "(at most about 1.8e308)"
    )
    assert parse_slo("latency:p99<1e300ms").threshold == pytest.approx(1e297)


def test_a_toml_date_among_the_slo_checks_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "dated.toml"
    path.write_text(LOAD + "[slo]\nchecks = [1979-05-27]\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(path))
    assert err.value.message == (
        f'{path}: slo.checks = ["1979-05-27"] must be a list of SLO strings such as '
        '"latency:p99<100ms"'
    )
