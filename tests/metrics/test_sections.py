"""The section registry is the one list of the report's optional sections: summary.json,
both templates and the terminal follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

import zqbench.outputs
from zqbench.metrics.sections import SECTIONS, SHOWN_ELSEWHERE
from zqbench.metrics.sections.base import Section
from zqbench.summary import Summary

TEMPLATES = Path(zqbench.outputs.__file__).parent / "templates" / "sections"


def test_every_optional_field_of_the_summary_is_a_section() -> None:
    """A field with no value (None) is left out of summary.json; each one is a section,
    or is named where the pages show it."""
    optional = [k for k, f in Summary.model_fields.items() if f.default is None]
    assert sorted(optional) == sorted([s.name for s in SECTIONS] + list(SHOWN_ELSEWHERE))
    assert len({s.name for s in SECTIONS}) == len(SECTIONS)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.name)
def test_each_section_has_its_two_partials(section: Section) -> None:
    for ext in ("html.j2", "md.j2"):
        text = (TEMPLATES / f"{section.name}.{ext}").read_text()
        assert "{% macro show(" in text


def test_every_partial_is_a_section() -> None:
    names = {p.name.split(".")[0] for p in TEMPLATES.iterdir()}
    assert names == {s.name for s in SECTIONS}
