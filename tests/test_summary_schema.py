"""docs/summary.schema.json is the Summary model's schema, and every example run obeys it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from zqbench.summary import Summary, json_schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "docs" / "summary.schema.json"
EXAMPLES = sorted((REPO / "reports" / "examples").glob("*/summary.json"))


def test_committed_schema_is_the_generated_one() -> None:
    """Regenerate with `python -m zqbench.summary > docs/summary.schema.json`."""
    assert SCHEMA_FILE.read_text() == json_schema()


def test_there_are_examples_to_check() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_obeys_the_schema_and_round_trips(path: Path) -> None:
    """Valid by the JSON Schema alone (as a tool outside zqbench sees it), parsed by the
    model, and written back byte for byte."""
    text = path.read_text()
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(json.loads(text))
    assert Summary.model_validate_json(text).to_json() == text
