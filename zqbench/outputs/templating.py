"""The jinja2 environments of the templates in outputs/templates/ (shipped as package data).

    html_environment()       autoescape on: every value is HTML-escaped unless marked safe
    markdown_environment()   no HTML escaping; table cells pass through the `cell` filter

Both raise on an undefined name (StrictUndefined), so a template that asks the view for a
field it lacks fails loudly instead of printing nothing. trim_blocks / lstrip_blocks let
block tags stand on their own lines without leaving blank lines in the output.
"""

from __future__ import annotations

from functools import cache

import jinja2


def _environment(*, autoescape: bool) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("zqbench.outputs", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def html_environment() -> jinja2.Environment:
    return _environment(autoescape=True)


@cache
def markdown_environment() -> jinja2.Environment:
    env = _environment(autoescape=False)
    env.filters["cell"] = table_cell
    env.filters["code"] = code
    return env


def table_cell(text: object) -> str:
    """Text that stays inside one Markdown table cell: a pipe would end the cell, a newline
    the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: object) -> str:
    """Inline code in Markdown."""
    return f"`{text}`"
