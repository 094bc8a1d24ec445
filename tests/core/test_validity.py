"""Validity a user controls (#11): `[validity]` in the scenario and the same as flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.core.conftest import MODEL, write_scenario, zqbench
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer

pytestmark = pytest.mark.slow

SMOKE = """
name = "tiny-smoke"
api = "anthropic"
[slo]
checks = ["errors:rate<50%"]
{validity}
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "2s"
[request]
max_tokens = 4
prompt_tokens = 8
"""


def _run(tmp_path: Path, ref_server: EmbeddedServer, validity: str, **options: object):
    scenario = write_scenario(tmp_path, SMOKE.format(validity=validity))
    return run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=ref_server.base_url,
            model=MODEL,
            out=tmp_path / "run",
            calibration="off",
            **options,  # type: ignore[arg-type]
        )
    ).summary


def test_forty_requests_are_invalid_by_default(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    summary = _run(tmp_path, ref_server, "")
    assert summary.requests.sent == 40
    assert summary.verdict == "invalid"
    first, *more = summary.validity.reasons
    assert first == "only 40 requests were sent; a valid run needs at least 100"
    # A busy machine may add the generator's own lateness (10 ms by default, or the load it
    # achieved): nothing else.
    assert all(r.startswith("the generator ") for r in more), more


def test_a_smoke_scenario_with_min_samples_20_is_judged_on_its_slos(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    # The generator's lateness on a busy machine is not what is tested (see test_run_cli).
    validity = '[validity]\nmin_samples = 20\nmax_schedule_lag = "500ms"\n'
    summary = _run(tmp_path, ref_server, validity)
    assert summary.requests.sent == 40
    assert summary.validity.ok, summary.validity.reasons
    assert summary.verdict == "pass"
    assert summary.validity.thresholds.min_samples == 20
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["validity"]["thresholds"]["min_samples"] == 20


def test_flags_override_the_scenario(ref_server: EmbeddedServer, tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, SMOKE.format(validity="[validity]\nmin_samples = 20\n"))
    out = tmp_path / "cli"
    args = ["run", str(scenario), "--target", ref_server.base_url, "--model", MODEL, "-q"]
    flags = ["--min-samples", "50", "--max-schedule-lag", "25ms", "--min-achieved-ratio", "0.9"]
    flags += ["--max-client-lag", "400ms"]
    result = zqbench(*args, *flags, "--calibration", "off", "--out", str(out))
    assert result.returncode == 4, result.stderr  # 40 < 50: invalid
    thresholds = json.loads((out / "summary.json").read_text())["validity"]["thresholds"]
    assert thresholds == {
        "max_schedule_lag_p99_s": 0.025,
        "max_client_lag_p99_s": 0.4,
        "min_achieved_ratio": 0.9,
        "min_samples": 50,
        "min_ratio_samples": 100,
    }


def test_a_bad_validity_flag_is_one_line() -> None:
    result = zqbench("run", "smoke", "--min-achieved-ratio", "97")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "zqbench: error: --min-achieved-ratio 97: must be a fraction of the offered load, "
        "0 < r <= 1"
    )
