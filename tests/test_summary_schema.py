"""docs/summary.schema.json and docs/sweep.schema.json are the models' schemas, and the
files zqbench writes obey them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from zqbench.summary import (
    SCHEMAS,
    Knee,
    StepSlo,
    Summary,
    SweepReport,
    SweepSettings,
    SweepStep,
    json_schema,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "reports" / "examples").glob("*/summary.json"))


def schema_file(name: str) -> Path:
    return REPO / "docs" / f"{name}.schema.json"


def check(name: str, text: str) -> None:
    """Valid by the JSON Schema alone, as a tool outside zqbench sees it."""
    schema = json.loads(schema_file(name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(text))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_committed_schema_is_the_generated_one(name: str) -> None:
    """Regenerate with `python -m zqbench.summary NAME > docs/NAME.schema.json`."""
    assert schema_file(name).read_text() == json_schema(SCHEMAS[name])


def test_there_are_examples_to_check() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_obeys_the_schema_and_round_trips(path: Path) -> None:
    """Valid by the JSON Schema, parsed by the model, and written back byte for byte."""
    text = path.read_text()
    check("summary", text)
    assert Summary.model_validate_json(text).to_json() == text


def sweep_step(index: int, rate: float, verdict: str) -> SweepStep:
    return SweepStep(
        index=index,
        phase="ramp" if index < 2 else "bisect",
        rate=rate,
        verdict=verdict,
        passed=verdict == "pass",
        sent=100,
        failed=0 if verdict == "pass" else 40,
        achieved_rate=None,
        latency_p50=0.0125,
        latency_p99="inf",
        ttft_p50=None,
        ttft_p99=None,
        slos=[StepSlo(expr="errors:rate<0.25", verdict=verdict)],
        validity_reasons=[],
        out_dir=f"step-{index:02d}-{rate:g}rps",
    )


def sweep_report(steps: list[SweepStep], knee: Knee | None) -> SweepReport:
    """A sweep of these steps (in the order they ran) from 50 to 100 req/s."""
    return SweepReport(
        scenario="sweep",
        target="http://127.0.0.1:8000",
        started_at="2026-11-29T10:45:01+00:00",
        slos=["errors:rate<0.25"],
        config=SweepSettings(
            min_rate=50.0, max_rate=100.0, step_factor=2.0, step_duration_s=2.0, bisect_steps=1
        ),
        steps=steps,
        curve=sorted(steps, key=lambda s: s.rate),
        knee=knee,
    )


@pytest.mark.parametrize("knee", [Knee(rate=50.0, step=0), None])
def test_sweep_report_obeys_the_schema_and_round_trips(knee: Knee | None) -> None:
    steps = [sweep_step(0, 50.0, "pass"), sweep_step(1, 100.0, "fail"), sweep_step(2, 75.0, "fail")]
    report = sweep_report(steps, knee)
    text = report.to_json()
    assert json.loads(text)["schema"] == "zqbench.sweep/1"
    check("sweep", text)
    assert SweepReport.model_validate_json(text).to_json() == text


@pytest.mark.parametrize(("old", "loop"), [("true", "open"), ("false", "closed")])
def test_a_summary_saved_before_the_executor_protocol_still_loads(
    tmp_path: Path, old: str, loop: str
) -> None:
    """Runs saved before #20 said `"open_loop": true|false`; they load as `loop`."""
    from zqbench.outputs.json_out import load_summary

    text = EXAMPLES[0].read_text().replace('"loop": "open"', f'"open_loop": {old}')
    assert '"open_loop"' in text
    (tmp_path / "summary.json").write_text(text)
    assert load_summary(tmp_path / "summary.json").load.loop == loop
