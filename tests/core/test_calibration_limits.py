"""Calibration against targets that answer badly: a size cap, a deadline per probe and one
for the whole calibration, and the run's warning path (prompts at one byte per token)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.core.conftest import write_scenario, zqbench
from tests.core.misbehaving import MisbehavingTarget, drip, huge, slow, usage_answer
from zqbench.dialects.base import DialectConfig
from zqbench.errors import TargetError
from zqbench.target.calibrate import MAX_ANSWER_BYTES, calibrate

CONFIG = DialectConfig(model="m")


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_huge_answer_stops_at_the_cap(api: str) -> None:
    """64 MiB of answer: the probe stops at calibration's cap (1 MiB), memory stays bounded."""
    target = MisbehavingTarget(huge(64 * 1024 * 1024))
    with target, pytest.raises(TargetError) as err:
        calibrate(target.base_url, api, CONFIG, use_cache=False, timeout_s=30)
    assert err.value.message == (
        f"calibration probe to {target.base_url}: the body passed the {MAX_ANSWER_BYTES}-byte cap"
    )
    assert MAX_ANSWER_BYTES <= 1024 * 1024


@pytest.mark.slow
@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_dripping_target_is_left_after_one_probe_deadline(api: str) -> None:
    with MisbehavingTarget(drip(usage_answer(api, 9), every_s=1.0)) as target:
        t0 = time.monotonic()
        with pytest.raises(TargetError) as err:
            calibrate(target.base_url, api, CONFIG, use_cache=False, timeout_s=1.0)
        elapsed = time.monotonic() - t0
    assert err.value.message == (
        f"calibration probe to {target.base_url}: no complete answer within 1 s"
    )
    assert elapsed < 5, f"{elapsed:.3f} s"  # the whole drip takes minutes


@pytest.mark.slow
def test_the_whole_calibration_has_a_deadline() -> None:
    """Each probe answers just inside its own deadline: the calibration as a whole must not
    take probes x deadline (a 404 for count_tokens, then four usage probes)."""
    not_found = slow(404, b'{"type": "error"}', delay_s=1.2)
    answer = slow(200, usage_answer("anthropic", 9), delay_s=1.2)
    with MisbehavingTarget(answer, count_tokens=not_found) as target:
        t0 = time.monotonic()
        with pytest.raises(TargetError) as err:
            calibrate(
                target.base_url, "anthropic", CONFIG, use_cache=False, timeout_s=2.0,
                deadline_s=1.5,
            )  # fmt: skip
        elapsed = time.monotonic() - t0
    assert err.value.message == (f"calibration probes to {target.base_url}: no fit within 1.5 s")
    # Five probes of 1.2 s would take 6 s; 3 s of slack is for a busy machine.
    assert elapsed < 1.5 + 3.0, f"{elapsed:.3f} s"


@pytest.mark.slow
def test_run_with_a_dripping_target_leaves_calibration_with_a_warning(tmp_path: Path) -> None:
    """`run --timeout 20` against a 1 byte/s target: calibration gives up within its deadline,
    the run goes on with prompts sized at one byte per token."""
    scenario = write_scenario(
        tmp_path,
        'name = "drip"\ndescription = "d"\napi = "openai"\n[load]\n'
        'executor = "constant-arrival-rate"\nrate = 2\nduration = "1s"\n'
        "[request]\nmax_tokens = 4\nstream = true\nprompt_tokens = 16\n",
    )
    out = tmp_path / "run"
    with MisbehavingTarget(drip(usage_answer("openai", 9), every_s=1.0)) as target:
        t0 = time.monotonic()
        res = zqbench(
            "run", str(scenario), "--target", target.base_url, "--model", "m",
            "--timeout", "20", "--out", str(out), "--quiet", timeout=120,
        )  # fmt: skip
        elapsed = time.monotonic() - t0
    warning = (
        f"calibration probe to {target.base_url}: no complete answer within 10 s; "
        "prompts sized at one byte per token"
    )
    assert f"warning: {warning}" in " ".join(res.stderr.split()), res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["environment"]["prompts"]["warnings"] == [warning]
    assert summary["environment"]["prompts"]["calibration"] is None
    assert elapsed < 60, "calibration (10 s per probe, 20 s in all) then a 1 s run"
